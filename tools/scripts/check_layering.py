#!/usr/bin/env python3
"""The layering rule of clattn's src/: folders by layer (base, runtime, attention, api), and every file calls
and includes only what lies below it.

Usage:
  check_layering.py SRC_DIR [OBJECT_DIR]   check the tree (and, given the folder of libclattn's object
                                           files, their symbols); exit 1 naming every upward arrow
  check_layering.py --self-test SRC_DIR    prove the check fails on an upward include and an upward call

Three checks:
  includes  a file may #include "x.h" only when x.h sits lower in ORDER (a .c may include its own header);
  symbols   a function an object uses (nm: U) must be defined by an object of a lower .c in ORDER.
A file of src/ missing from ORDER is an error too: a new module must be given its place here; and
  folders   each file sits in its layer's folder (LAYERS), none loose in src/.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The layers, bottom to top: each a folder of src/, and inside each the order of its files, bottom to top.
# Headers sit below the files that include them; context.h holds the context's fields only (data that
# every module reads) while context.c, the owner that creates and frees every part, sits at the top.
# (src/mpi/ and src/python/ are libraries of their own over the public API: not layers of libclattn.)
LAYERS = [
    ("base", [                         # no OpenCL state: statuses, errors, storage types, hashing, faults
        "fault.h", "fault.c",          # test-only failure points (built with -Dfault_injection=true)
        "hash.h",                      # FNV-1a, the one non-cryptographic hash (header-only; libclattn_mpi's too)
        "status.c",                    # status names and descriptions
        "formats.def",                 # the storage formats' table: one row each (included, X-macro style)
        "dtype.h", "dtype.c",          # storage formats: the table's sizes, names and rules
        "error.h", "error.c",          # error detail per context and per thread, warnings, build logs
        "versioned_rule.h",            # the struct_size rule as a verdict (header-only; libclattn_mpi's too)
        "call_options.def",            # the table of call options: one row each (included, X-macro style)
        "call_options.h",              # the table's surfaces and the layer-to-SDPA copy it generates
        "versioned.h", "versioned.c",  # the struct_size rule of the public structs, worded for a context
        "sha256.h", "sha256.c",        # SHA-256, for the cache's keys
    ]),
    ("runtime", [                      # devices, options, caches, programs, parameters, launches
        "options.h", "options.c",      # context options; the only reader of the environment
        "device.h", "device.c",        # platforms, devices, the device-spec grammar, device facts
        "tuning_tables.h", "tuning_tables.c",  # the kernel families' per-device parameters: one table each
        "scratch.h",                   # the reused temporaries' types
        "profile.h",                   # the kernel-time log's types
        "context.h",                   # the context's fields
        "validate.h", "validate.c",    # overflow-safe sizes, buffer and shape checks
        "scratch.c",                   # reused temporaries
        "profile.c",                   # kernels' device time from their profiling events
        "launch.h", "launch.c",        # tensor views, kernel arguments, launches
        "params.h", "params.c",        # every kernel's parameters (cl/params.h) bound; the kernel families
        "cache.h", "cache.c",          # on-disk program binaries and tuning records
        "program.h", "program.c",      # kernel sources, builds, build logs; THE kernel cache
        "tuning.h", "tuning.c",        # the one lookup of a family's parameters: options -> record -> table
    ]),
    ("attention", [                    # masks, mods, storage conversions, the partition, one file per path
        "mods.h", "mods.c",            # programmable attention: the caller's score/mask functions, checked and probed
        "block_mask.h", "block_mask.c",  # block masks: empty / partial / full blocks from mask_mod or a layout
        "convert.h", "convert.c",      # storage-type conversions on the device, quantising row writes
        "masks.h", "masks.c",          # every mask kind: checks, counts, uploads, kernel arguments
        "partition.h", "partition.c",  # the partition primitive: a query block x a key run -> the sub-call; the merge
        "projection.h", "projection.c",  # GEMM (clattn's kernel, or CLBlast + bias), chosen per device
        "staged.h", "staged.c",        # score / softmax / weighted-sum path, the public stage calls
        "tiles.h", "tiles.c",          # a ragged launch's list of work-groups (none idle)
        "fused.h", "fused.c",          # the fused flash kernel
        "reproducible.h", "reproducible.c",  # reproducible arithmetic: a work-item a row (issue 41)
        "decode.h", "decode.c",        # the decode path: keys split over work-groups, then merged
    ]),
    ("api", [                          # the public entry points, the owner, the device groups
        "sdpa.h", "sdpa.c",            # clattn_sdpa, the choice of path
        "partition_api.c",             # clattn_partition_*: the primitive behind the whole call's checks
        "backward.h", "backward.c",    # clattn_sdpa_backward: the gradients (cl/backward*.cl)
        "mha.h", "mha.c",              # clattn_mha
        "mha_backward.c",              # clattn_mha_backward: the layer's gradients (cl/layer_backward.cl)
        "tune.c",                      # clattn_tune: every family's candidates measured, the choices recorded
        "merge.c",                     # clattn_merge: partial results over disjoint key sets combined
        "kvcache.h", "kvcache.c",      # KV caches the application owns: appends, ONNX past/present
        "ragged.h", "ragged.c",        # clattn_sdpa_ragged: sequences of different lengths packed
        "paged.h", "paged.c",          # paged caches: block-id checks, appends and attention through a table
        "sparse.h", "sparse.c",        # top-k sparse attention: each query row over the keys it selects
        "sparse_backward.c",           # its gradients (cl/sparse_backward.cl)
        "topk.c",                      # top-k selection: each query row's highest-scoring keys
        "cascade.c",                   # clattn_sdpa_cascade: shared prefixes read once, merged with each own part
        "host.c",                      # the *_host variants
        "context.c",                   # the owner
        "group_parts.h",               # what the device-group files share
        "group.c",                     # device groups: one call over the contexts of several devices
        "group_mha.c",                 # device groups' layers
    ]),
]
ORDER = [name for _, names in LAYERS for name in names]
FOLDER = {name: folder for folder, names in LAYERS for name in names}
RANK = {name: i for i, name in enumerate(ORDER)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
GENERATED = {"clattn_kernels.h"}  # made by the build from cl/
# Kernel-side files the host reads too: definitions only (cl/params.h, every kernel's parameter list).
KERNEL_SHARED = {"../../cl/params.h"}


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
    """{name: text} of every .c/.h in the layer folders; a file in the wrong folder (or loose in src/, or
    in a folder that is no layer) is reported by check_folders."""
    files = {}
    for folder in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, folder)
        if not os.path.isdir(path) or folder in ("mpi", "python"):
            continue
        for name in os.listdir(path):
            if name.endswith((".c", ".h")):
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    files[name] = f.read()
                FOUND_IN[name] = folder
    return files


FOUND_IN = {}  # name -> the folder read_sources found it in


def check_folders(src_dir):
    """Every file of a layer sits in its layer's folder; nothing of the library lies loose in src/."""
    problems = []
    for name in sorted(os.listdir(src_dir)):
        if name.endswith((".c", ".h")):
            problems.append(f"{name}: loose in src/: put it in its layer's folder ({', '.join(f for f, _ in LAYERS)})")
    for name, folder in sorted(FOUND_IN.items()):
        if name in FOLDER and FOLDER[name] != folder:
            problems.append(f"{folder}/{name}: belongs in {FOLDER[name]}/ (its layer in ORDER)")
        if folder not in {f for f, _ in LAYERS}:
            problems.append(f"{folder}/{name}: {folder}/ is not a layer of LAYERS")
    return problems


def read_objects(obj_dir):
    """Meson names libclattn's objects src_LAYER_NAME.c.o inside the library's private folder."""
    objects = {}
    for name in sorted(os.listdir(obj_dir)):
        m = re.fullmatch(r"src_(?:%s)_(\w+\.c)\.o" % "|".join(f for f, _ in LAYERS), name)
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
    FOUND_IN.clear()
    problems = check_includes(read_sources(src_dir)) + check_folders(src_dir)
    if obj_dir is not None:
        objects = read_objects(obj_dir)
        # Every .c of src/ must have its object (fault.c only in a -Dfault_injection=true build).
        expected = {n for n in FOUND_IN if n.endswith(".c")} - {"fault.c"}
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
        if check_includes(read_sources(copy)) or check_folders(copy):
            failures.append("the unchanged tree should pass")
        with open(os.path.join(copy, "base", "error.c"), "a", encoding="utf-8") as f:
            f.write('\n#include "sdpa.h"\n')
        found = check_includes(read_sources(copy))
        if not any("error.c: includes sdpa.h" in p for p in found):
            failures.append("an upward include (error.c → sdpa.h) was not reported")
        open(os.path.join(copy, "api", "newmodule.c"), "w").close()
        if not any("newmodule.c" in p for p in check_includes(read_sources(copy))):
            failures.append("a file outside ORDER was not reported")
        shutil.move(os.path.join(copy, "api", "sdpa.c"), os.path.join(copy, "base", "sdpa.c"))
        FOUND_IN.clear()
        read_sources(copy)
        if not any("base/sdpa.c: belongs in api/" in p for p in check_folders(copy)):
            failures.append("a file in another layer's folder (api's sdpa.c in base/) was not reported")
        open(os.path.join(copy, "loose.c"), "w").close()
        if not any("loose.c: loose in src/" in p for p in check_folders(copy)):
            failures.append("a file loose in src/ was not reported")
    fake = {"error.c": ({"set_error"}, {"fused_run"}), "fused.c": ({"fused_run"}, {"set_error"})}
    found = check_symbols(fake)
    if found != ["error.c: calls fused_run of fused.c, which is not below it (upward call)"]:
        failures.append(f"an upward call was not reported exactly: {found}")
    for f in failures:
        print("self-test FAILED:", f)
    print("self-test:", "FAILED" if failures else
          "passed (upward include, unknown file, wrong folder, loose file and upward call caught)")
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
