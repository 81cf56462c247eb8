"""python -m clattn devices: the OpenCL devices, as `clattn devices` lists them."""
import sys

from . import __version__, devices


def main(argv):
    if argv[1:] != ["devices"]:
        print("usage: python -m clattn devices", file=sys.stderr)
        return 2
    found = devices()
    if not found:
        print("no OpenCL device (install an OpenCL driver: Debian's pocl-opencl-icd gives a CPU device)",
              file=sys.stderr)
        return 1
    print(f"clattn {__version__}: {len(found)} device(s)")
    for d in found:
        print(f"  {d['spec']:<6} {d['type']:<11} {d['name']}  ({d['platform']}, {d['vendor']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
