#!/usr/bin/env python3
"""The call options' table (src/base/call_options.def) against every surface that must carry its rows.

Usage:
  check_options.py ROOT [--clattn EXE [--no-ring]]   walk the table; exit 1 naming every gap (--no-ring: the
                                         tool was built without MPI: ring's --help from the sources)
  check_options.py ROOT --self-test      prove each check fails when one surface lacks one option
  check_options.py ROOT --write-doc      rewrite docs/options.md's table from the rows

What follows from the rows by code (the X-macros of call_options.h and the files that include the table) is
checked to be so: the generic checks (src/runtime/validate.c), the layer's forwarding (src/api/mha.c, no hand copy left),
the reference layer's (tools/reference/reference.c), the ring's fingerprint (src/mpi/fingerprint.c), the
Python extension's keywords (src/python/clattn/_clattn/attention.c). What follows by this test:
  header    every row is a field of its struct(s) in include/clattn/clattn.h (CLATTN_OPTION: clattn_sdpa_desc
            and clattn_mha_desc; CLATTN_SDPA_OPTION: clattn_sdpa_desc; CLATTN_MASKS_OPTION: clattn_masks);
  python    a row marked OPT_PY_SDPA (OPT_PY_LAYER) names a keyword `py` of clattn.scaled_dot_product_attention
            (clattn.multi_head_attention) that its docstring mentions, and the package passes the extension its C
            name (src/python/clattn/*.py);
  cli       a row marked OPT_CLI_SDPA, _MHA, _BENCH or _RING names a flag `cli` that the subcommand takes (its
            option tables in tools/cli/) and whose --help shows it (with --clattn: the help the program prints);
  reference a row marked OPT_REF is read by the fp64 reference (tools/reference/reference.c);
  docs      docs/options.md's table is the one --write-doc writes from the rows.
"""
import ast
import os
import re
import subprocess
import sys

CALLS = ["OPT_SDPA", "OPT_LAYER", "OPT_RING", "OPT_PY_SDPA", "OPT_PY_LAYER", "OPT_CLI_SDPA", "OPT_CLI_MHA",
         "OPT_CLI_BENCH", "OPT_CLI_RING", "OPT_REF"]
GROUPS = {"OPT_LIB_CALLS": ["OPT_SDPA", "OPT_LAYER", "OPT_RING"], "OPT_C_CALLS": ["OPT_SDPA", "OPT_LAYER", "OPT_RING", "OPT_REF"]}
GROUPS["OPT_ALL_CALLS"] = GROUPS["OPT_C_CALLS"] + ["OPT_PY_SDPA", "OPT_PY_LAYER", "OPT_CLI_SDPA", "OPT_CLI_MHA",
                                                   "OPT_CLI_RING"]
PY_CALLS = {"OPT_PY_SDPA": "scaled_dot_product_attention", "OPT_PY_LAYER": "multi_head_attention"}
CLI_CALLS = {"OPT_CLI_SDPA": "sdpa", "OPT_CLI_MHA": "mha", "OPT_CLI_BENCH": "bench", "OPT_CLI_RING": "ring"}
# The kinds the extension reads as keywords (attention.c's PY_READABLE_*).
PY_READABLE = {"OPT_SCALE", "OPT_CAP", "OPT_PER_HEAD", "OPT_ENUM", "OPT_LENGTHS", "OPT_OFFSETS", "OPT_WINDOW",
               "OPT_SIZE", "OPT_TREE"}
DOC_BEGIN, DOC_END = "<!-- options table: begin (tools/scripts/check_options.py --write-doc) -->", \
    "<!-- options table: end -->"


def split_args(text):
    """A macro's arguments: commas outside strings and parentheses."""
    args, depth, cur, i, quote = [], 0, "", 0, None
    while i < len(text):
        c = text[i]
        if quote:
            cur += c
            if c == "\\":
                cur += text[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur += c
        elif c == "(":
            depth += 1
            cur += c
        elif c == ")":
            depth -= 1
            cur += c
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    args.append(cur.strip())
    return args


def c_string(arg):
    """The text of a C string literal (adjacent literals joined)."""
    return "".join(bytes(m, "utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8")
                   for m in re.findall(r'"((?:[^"\\]|\\.)*)"', arg))


def read_rows(text):
    """The rows of call_options.def: dicts of the columns, `struct` the macro's (option, sdpa, masks)."""
    rows = []
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    for m in re.finditer(r"\bCLATTN_(OPTION|SDPA_OPTION|MASKS_OPTION)\s*\(", body):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(body[i], 0)
            i += 1
        a = split_args(body[m.end():i - 1])
        if len(a) != 11:
            raise SystemExit(f"call_options.def: the row at {a[0]!r} has {len(a)} columns, not 11")
        calls = set()
        for part in a[6].split("|"):
            part = part.strip()
            calls.update(GROUPS.get(part, [part]))
        unknown = calls - set(CALLS)
        if unknown:
            raise SystemExit(f"call_options.def: row {a[0]}: unknown calls {sorted(unknown)}")
        rows.append(dict(struct={"OPTION": "both", "SDPA_OPTION": "sdpa", "MASKS_OPTION": "masks"}[m.group(1)],
                         name=a[0], kind=a[1], type=a[2], default=a[3], limit=a[4], range=c_string(a[5]),
                         calls=calls, result=a[7] == "1", py=c_string(a[8]), cli=c_string(a[9]), doc=c_string(a[10])))
    return rows


def struct_fields(header, name):
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header, re.S)
    if not m:
        return set()
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    fields = set()
    for decl in body.split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl)
        for part in decl.split(","):
            words = re.findall(r"[A-Za-z_]\w*", part)
            if words:
                fields.add(words[-1])
    return fields


def py_function(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def cli_flags(sources):
    """Every flag name the CLI's option tables give ({"name", ...} entries)."""
    return set(re.findall(r'\{"([a-z0-9-]+)",\s*(?:NULL|&)', sources))


def doc_table(rows):
    names = {c: c[4:].lower().replace("_", " ") for c in CALLS}
    lines = ["| option | kind | C type | default | range | taken by | changes the result | Python | CLI | what it is |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        field = ("masks." if r["struct"] == "masks" else "") + r["name"]
        taken = ", ".join(names[c] for c in CALLS if c in r["calls"])
        lines.append(f"| `{field}` | {r['kind'][4:].lower()} | `{r['type']}` | `{r['default']}` | {r['range']} | "
                     f"{taken} | {'yes' if r['result'] else 'no'} | {('`' + r['py'] + '`') if r['py'] else ''} | "
                     f"{('`--' + r['cli'] + '`') if r['cli'] else ''} | {r['doc']} |")
    return "\n".join(lines)


def load(root, clattn=None, no_ring=False):
    """Every text the checks read, by name (the self-test changes copies of them)."""
    def read(rel):
        path = os.path.join(root, rel)
        return open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    t = {rel: read(rel) for rel in [
        "src/base/call_options.def", "include/clattn/clattn.h", "src/runtime/validate.c", "src/api/mha.c", "src/mpi/fingerprint.c",
        "src/mpi/fingerprint.h", "src/python/clattn/_clattn/attention.c", "tools/reference/reference.c", "docs/options.md"]}
    pkg = os.path.join(root, "src", "python", "clattn")
    for f in sorted(os.listdir(pkg)):  # (the package's modules: the calls and the options they pass)
        if f.endswith(".py"):
            t["src/python/clattn/" + f] = open(os.path.join(pkg, f), encoding="utf-8").read()
    cli_dir = os.path.join(root, "tools", "cli")
    t["cli sources"] = "".join(open(os.path.join(cli_dir, f), encoding="utf-8").read()
                               for f in sorted(os.listdir(cli_dir)) if f.endswith((".c", ".h")))
    t["help"] = {}
    for sub in CLI_CALLS.values():
        if clattn and not (no_ring and sub == "ring"):  # (a tool built without MPI has no ring to ask)
            p = subprocess.run([clattn, sub, "--help"], capture_output=True, text=True)
            t["help"][sub] = p.stdout + p.stderr
        else:  # (the help strings as the sources hold them)
            t["help"][sub] = t["cli sources"]
    return t


def check(t):
    """Every gap, as messages."""
    gaps = []
    rows = read_rows(t["src/base/call_options.def"])
    names = [("masks." if r["struct"] == "masks" else "") + r["name"] for r in rows]
    for n in set(names):
        if names.count(n) > 1:
            gaps.append(f"table: {n} has {names.count(n)} rows")
    header = t["include/clattn/clattn.h"]
    structs = {"sdpa": struct_fields(header, "clattn_sdpa_desc"), "mha": struct_fields(header, "clattn_mha_desc"),
               "masks": struct_fields(header, "clattn_masks")}
    for r in rows:
        where = {"both": ["sdpa", "mha"], "sdpa": ["sdpa"], "masks": ["masks"]}[r["struct"]]
        for s in where:
            if r["name"] not in structs[s]:
                gaps.append(f"header: {r['name']} is not a field of clattn_{s if s == 'masks' else s + '_desc'}")
        if ("OPT_LAYER" in r["calls"]) != (r["struct"] in ("both", "masks")) and r["struct"] != "masks":
            gaps.append(f"table: {r['name']}: OPT_LAYER must mark exactly the options both descriptors carry")
        if not r["doc"]:
            gaps.append(f"table: {r['name']} has no documentation")
    # What follows by code: the files include the table (and no hand copy is left in the layer).
    for rel, needle in [("src/runtime/validate.c", '#include "call_options.def"'),
                        ("src/mpi/fingerprint.c", '#include "call_options.def"'),
                        ("src/mpi/fingerprint.h", '#include "call_options.def"'),
                        ("src/python/clattn/_clattn/attention.c", '#include "call_options.def"'),
                        ("src/api/mha.c", "call_options_mha_to_sdpa("),
                        ("tools/reference/reference.c", "call_options_mha_to_sdpa(")]:
        if needle not in t[rel]:
            gaps.append(f"{rel}: does not take the options from the table ({needle} missing)")
    for r in rows:
        if r["struct"] == "both" and r["name"] not in ("kv_len", "masks") and \
                re.search(r"\bsd\.%s\s*=" % r["name"], t["src/api/mha.c"]):
            gaps.append(f"src/api/mha.c: copies {r['name']} by hand (call_options_mha_to_sdpa does)")
    # Python: keywords and docstrings.
    package = "".join(text for rel, text in sorted(t.items())
                      if rel.startswith("src/python/clattn/") and rel.endswith(".py"))
    try:
        tree = ast.parse(package)
    except SyntaxError as e:
        tree = None
        gaps.append(f"python: the package does not parse: {e}")
    for bit, fn in PY_CALLS.items():
        node = py_function(tree, fn) if tree else None
        if node is None:
            gaps.append(f"python: no function {fn}")
            continue
        params = {a.arg for a in node.args.args + node.args.kwonlyargs}
        doc = ast.get_docstring(node) or ""
        for r in rows:
            if bit not in r["calls"]:
                continue
            if not r["py"]:
                gaps.append(f"table: {r['name']} is marked {bit} but names no Python keyword")
            elif r["py"] not in params:
                gaps.append(f"python: {fn} has no keyword {r['py']} ({r['name']})")
            elif not re.search(r"\b%s\b" % re.escape(r["py"]), doc):
                gaps.append(f"python: {fn}'s docstring does not document {r['py']} ({r['name']})")
            # (a key of the options' dict: ("NAME", …) or opts["NAME"])
            if r["kind"] in PY_READABLE and r["py"] and not re.search(r'[(\[]"%s"' % r["name"], package):
                gaps.append(f"python: the package never passes {r['name']} to the extension (for {r['py']})")
    # CLI: the flags and their --help.
    flags = cli_flags(t["cli sources"])
    for bit, sub in CLI_CALLS.items():
        for r in rows:
            if bit not in r["calls"]:
                continue
            if not r["cli"]:
                gaps.append(f"table: {r['name']} is marked {bit} but names no flag")
                continue
            if r["cli"] not in flags:
                gaps.append(f"cli: no option table takes --{r['cli']} ({r['name']})")
            if not re.search(r"--%s\b" % re.escape(r["cli"]), t["help"][sub]):
                gaps.append(f"cli: clattn {sub} --help does not show --{r['cli']} ({r['name']})")
    # The fp64 reference.
    ref = re.sub(r"/\*.*?\*/", "", t["tools/reference/reference.c"], flags=re.S)
    for r in rows:
        if "OPT_REF" in r["calls"] and not re.search(r"(->|\.)%s\b" % r["name"], ref):
            gaps.append(f"reference: tools/reference/reference.c never reads {r['name']}")
    # The docs.
    doc = t["docs/options.md"]
    if DOC_BEGIN not in doc or DOC_END not in doc:
        gaps.append("docs: docs/options.md has no table (check_options.py --write-doc)")
    elif doc.split(DOC_BEGIN)[1].split(DOC_END)[0].strip() != doc_table(rows):
        gaps.append("docs: docs/options.md's table is not the table's (check_options.py --write-doc)")
    return gaps, rows


def self_test(t):
    """Each surface without one option: the check must name it."""
    import copy
    rows = read_rows(t["src/base/call_options.def"])
    assert not check(t)[0], "the tree itself has gaps: " + "; ".join(check(t)[0])
    mutations = [
        ("the layer's header field", lambda u: u.__setitem__("include/clattn/clattn.h", u["include/clattn/clattn.h"]
         .replace("    const float *logit_scale;\n} clattn_mha_desc;", "} clattn_mha_desc;")), "clattn_mha_desc"),
        ("a Python keyword", lambda u: u.__setitem__("src/python/clattn/_attention.py",
         u["src/python/clattn/_attention.py"].replace("key_lengths=None, logit_scale=None, algorithm=",
                                                      "key_lengths=None, algorithm=")), "multi_head_attention has no"),
        ("a docstring line", lambda u: u.__setitem__("src/python/clattn/_attention.py",
         u["src/python/clattn/_attention.py"].replace("key_lengths, logit_scale (a scale per", "key_lengths, (a scale per")),
         "docstring does not document logit_scale"),
        ("the option passed to the extension", lambda u: u.__setitem__("src/python/clattn/_arrays.py",
         u["src/python/clattn/_arrays.py"].replace('("logit_scale", _per_head', '("l0git_scale", _per_head')),
         "never passes logit_scale"),
        ("a CLI flag in --help", lambda u: u["help"].__setitem__("mha", u["help"]["mha"].replace("--logit-scale", "--x")),
         "clattn mha --help does not show --logit-scale"),
        ("a CLI option table", lambda u: u.__setitem__("cli sources", u["cli sources"].replace(
            '{"logit-scale", NULL', '{"logit-scal", NULL')), "no option table takes --logit-scale"),
        ("the reference", lambda u: u.__setitem__("tools/reference/reference.c",
         u["tools/reference/reference.c"].replace("logit_scale", "l0git_scale")), "never reads logit_scale"),
        ("the layer's forwarding", lambda u: u.__setitem__("src/api/mha.c", u["src/api/mha.c"].replace(
            "call_options_mha_to_sdpa(", "copy_by_hand(") + "\n    sd.softcap = desc->softcap;\n"), "src/api/mha.c"),
        ("the fingerprint", lambda u: u.__setitem__("src/mpi/fingerprint.c", u["src/mpi/fingerprint.c"].replace(
            '#include "call_options.def"', "")), "fingerprint.c"),
        ("a table row's Python keyword", lambda u: u.__setitem__("src/base/call_options.def", u["src/base/call_options.def"]
         .replace('"logit_scale", "logit-scale"', '"", "logit-scale"')), "names no Python keyword"),
        ("the docs", lambda u: u.__setitem__("docs/options.md", u["docs/options.md"].replace("`logit_scale`", "`x`")),
         "docs/options.md's table"),
    ]
    failed = 0
    for what, mutate, needle in mutations:
        u = copy.deepcopy(t)
        mutate(u)
        gaps = check(u)[0]
        if not any(needle in g for g in gaps):
            print(f"self-test: without {what} the check did not say '{needle}': {gaps}")
            failed += 1
    print(f"self-test: {len(mutations) - failed} of {len(mutations)} mutations caught ({len(rows)} rows)")
    return failed == 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = argv[1]
    clattn = argv[argv.index("--clattn") + 1] if "--clattn" in argv else None
    t = load(root, clattn, no_ring="--no-ring" in argv)
    if "--write-doc" in argv:
        rows = read_rows(t["src/base/call_options.def"])
        path = os.path.join(root, "docs", "options.md")
        doc = t["docs/options.md"]
        table = DOC_BEGIN + "\n" + doc_table(rows) + "\n" + DOC_END
        doc = re.sub(re.escape(DOC_BEGIN) + ".*?" + re.escape(DOC_END), lambda m: table, doc, flags=re.S) \
            if DOC_BEGIN in doc else doc + "\n" + table + "\n"
        with open(path, "w", encoding="utf-8") as f:
            f.write(doc)
        return 0
    if "--self-test" in argv:
        return 0 if self_test(t) else 1
    gaps, rows = check(t)
    for g in gaps:
        print(g)
    surfaces = sum(len(r["calls"]) for r in rows)
    print(f"check_options: {len(rows)} rows, {surfaces} (row, call) pairs, {len(gaps)} gaps")
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
