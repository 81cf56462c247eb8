#!/usr/bin/env python3
"""The layering rule of clattn's src/: every file calls and includes only what lies below it.

Usage:
  check_layering.py SRC_DIR [OBJECT_DIR]   check the tree (and, given the folder of libclattn's object
                                           files, their symbols); exit 1 naming every upward arrow
  check_layering.py --self-test SRC_DIR    prove the check fails on an upward include and an upward call

Two checks:
  includes  a file may #include "x.h" only when x.h sits lower in ORDER (a .c may include its own header);
  symbols   a function an object uses (nm: U) must be defined by an object of a lower .c in ORDER.
A file of src/ missing from ORDER is an error too: a new module must be given its place here.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Bottom to top. Headers sit below the files that include them; context.h holds the context's fields
# only (data that every module reads) while context.c, the owner that creates and frees every part,
# sits at the top.
ORDER = [
    "fault.h", "fault.c",              # test-only failure points (built with -Dfault_injection=true)
    "hash.h",                          # FNV-1a, the one non-cryptographic hash (header-only; libclattn_mpi's too)
    "status.c",                        # status names and descriptions
    "dtype.h", "dtype.c",              # storage types: sizes and names
    "error.h", "error.c",              # error detail per context and per thread, warnings, build logs
    "versioned_rule.h",                # the struct_size rule as a verdict (header-only; libclattn_mpi's too)
    "versioned.h", "versioned.c",      # the struct_size rule of the public structs, worded for a context
    "options.h", "options.c",          # context options; the only reader of the environment
    "device.h", "device.c",            # platforms, devices, the device-spec grammar, device facts
    "tuning_tables.h", "tuning_tables.c",  # the kernel families' per-device parameters: one table each, one class rule
    "scratch.h",                       # the reused temporaries' types
    "profile.h",                       # the kernel-time log's types
    "context.h",                       # the context's fields
    "validate.h", "validate.c",        # overflow-safe sizes, buffer and shape checks
    "scratch.c",                       # reused temporaries
    "profile.c",                       # kernels' device time from their profiling events
    "launch.h", "launch.c",            # tensor views, kernel arguments, launches
    "params.h", "params.c",            # every kernel's parameters (cl/params.h) bound; the kernel families
    "sha256.h", "sha256.c",            # SHA-256, for the cache's keys
    "cache.h", "cache.c",              # on-disk program binaries and tuning records
    "program.h", "program.c",          # kernel sources, builds, build logs; THE kernel cache
    "tuning.h", "tuning.c",            # the one lookup of a family's parameters: options -> record -> table
    "mods.h", "mods.c",                # programmable attention: the caller's score/mask functions, checked and probed
    "block_mask.h", "block_mask.c",    # block masks: empty / partial / full blocks from mask_mod or a layout
    "convert.h", "convert.c",          # storage-type conversions on the device, quantising row writes
    "masks.h", "masks.c",              # every mask kind: checks, counts, uploads, kernel arguments
    "partition.h", "partition.c",      # the partition primitive: a query block x a key run -> the sub-call; the merge
    "projection.h", "projection.c",    # GEMM (clattn's kernel, or CLBlast + bias), chosen per device
    "staged.h", "staged.c",            # score / softmax / weighted-sum path, the public stage calls
    "fused.h", "fused.c",              # the fused flash kernel
    "decode.h", "decode.c",            # the decode path: keys split over work-groups, then merged
    "sdpa.h", "sdpa.c",                # clattn_sdpa, the choice of path
    "partition_api.c",                 # clattn_partition_*: the primitive behind the whole call's checks
    "backward.h", "backward.c",        # clattn_sdpa_backward: the gradients (cl/backward*.cl)
    "mha.h", "mha.c",                  # clattn_mha
    "mha_backward.c",                  # clattn_mha_backward: the layer's gradients (cl/layer_backward.cl)
    "tune.c",                          # clattn_tune: every family's candidates measured, the choices recorded
    "merge.c",                         # clattn_merge: partial results over disjoint key sets combined
    "kvcache.h", "kvcache.c",          # KV caches the application owns: appends, ONNX past/present
    "ragged.h", "ragged.c",            # clattn_sdpa_ragged: sequences of different lengths packed
    "paged.c",                         # paged caches: block-id checks, appends and attention through a table
    "host.c",                          # the *_host variants
    "context.c",                       # the owner
    "group.c",                         # device groups: one call over the contexts of several devices
]
RANK = {name: i for i, name in enumerate(ORDER)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
GENERATED = {"clattn_kernels.h"}  # made by the build from cl/
# Kernel-side files the host reads too: definitions only (cl/params.h, every kernel's parameter list).
KERNEL_SHARED = {"../cl/params.h"}


def check_includes(files):
    """files: {name: text}. Returns a list of violations."""
    problems = []
    for name in sorted(files):
        if name not in RANK:
            problems.append(f"{name}: not in ORDER of {os.path.basename(__file__)}: give it its place")
            continue
        own_header = name[:-2] + ".h" if name.endswith(".c") else None
        for inc in INCLUDE.findall(files[name]):
            if inc.startswith("clattn/") or inc in GENERATED or inc in KERNEL_SHARED or inc == own_header:
                continue
            if inc not in RANK:
                problems.append(f"{name}: includes {inc}, which is not in ORDER")
            elif RANK[inc] >= RANK[name]:
                problems.append(f"{name}: includes {inc}, which is not below it (upward arrow)")
    return problems


def check_symbols(objects):
    """objects: {"x.c": (defined set, undefined set)}. Returns a list of violations."""
    definer = {}
    for src, (defined, _) in objects.items():
        for sym in defined:
            definer[sym] = src
    problems = []
    for src in sorted(objects):
        if src not in RANK:
            problems.append(f"{src}: object not in ORDER")
            continue
        for sym in sorted(objects[src][1]):
            callee = definer.get(sym)
            if callee and callee != src and RANK.get(callee, -1) >= RANK[src]:
                problems.append(f"{src}: calls {sym} of {callee}, which is not below it (upward call)")
    return problems


def read_sources(src_dir):
    files = {}
    for name in os.listdir(src_dir):
        if name.endswith((".c", ".h")):
            with open(os.path.join(src_dir, name), encoding="utf-8") as f:
                files[name] = f.read()
    return files


def read_objects(obj_dir):
    """Meson names libclattn's objects src_NAME.c.o inside the library's private folder."""
    objects = {}
    for name in sorted(os.listdir(obj_dir)):
        m = re.fullmatch(r"src_(\w+\.c)\.o", name)
        if not m:
            continue
        out = subprocess.run(["nm", os.path.join(obj_dir, name)], check=True, capture_output=True, text=True).stdout
        defined, undefined = set(), set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                undefined.add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBR":
                defined.add(parts[2])
        objects[m.group(1)] = (defined, undefined)
    return objects


def check(src_dir, obj_dir=None):
    problems = check_includes(read_sources(src_dir))
    if obj_dir is not None:
        objects = read_objects(obj_dir)
        # Every .c of src/ must have its object (fault.c only in a -Dfault_injection=true build).
        expected = {n for n in os.listdir(src_dir) if n.endswith(".c")} - {"fault.c"}
        for name in sorted(expected - set(objects)):
            problems.append(f"{name}: no object in {obj_dir}, so its calls were not checked")
        problems += check_symbols(objects)
    return problems


def self_test(src_dir):
    """The check must catch an upward include in a real copy of src/ and an upward call."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "src")
        shutil.copytree(src_dir, copy)
        if check_includes(read_sources(copy)):
            failures.append("the unchanged tree should pass")
        with open(os.path.join(copy, "error.c"), "a", encoding="utf-8") as f:
            f.write('\n#include "sdpa.h"\n')
        found = check_includes(read_sources(copy))
        if not any("error.c: includes sdpa.h" in p for p in found):
            failures.append("an upward include (error.c → sdpa.h) was not reported")
        open(os.path.join(copy, "newmodule.c"), "w").close()
        if not any("newmodule.c" in p for p in check_includes(read_sources(copy))):
            failures.append("a file outside ORDER was not reported")
    fake = {"error.c": ({"set_error"}, {"fused_run"}), "fused.c": ({"fused_run"}, {"set_error"})}
    found = check_symbols(fake)
    if found != ["error.c: calls fused_run of fused.c, which is not below it (upward call)"]:
        failures.append(f"an upward call was not reported exactly: {found}")
    for f in failures:
        print("self-test FAILED:", f)
    print("self-test:", "FAILED" if failures else "passed (upward include, unknown file and upward call caught)")
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--self-test":
        return self_test(argv[2])
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    problems = check(argv[1], argv[2] if len(argv) == 3 else None)
    for p in problems:
        print("layering:", p)
    print(f"layering: {len(ORDER)} files in order, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
