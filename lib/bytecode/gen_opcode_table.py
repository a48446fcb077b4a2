"""Generates lib/bytecode's opcode table from the target CPython itself.

Run at build time by the interpreter libdynamo embeds (never by hand):

    python3.11 gen_opcode_table.py OUTPUT.inc

Every number in the output comes from that interpreter's `opcode` and `dis`
modules, so moving to 3.12 or 3.13 is a rebuild, not an edit. The few facts
those modules do not expose as data (which jumps are unconditional, how many
low bits of an oparg are flags) are derived here from the version, in one
place, with a comment on each.
"""
import dis
import opcode
import sys

FLAG_NAMES = [
    "kHasArg", "kHasConst", "kHasName", "kHasJumpRelative", "kHasJumpAbsolute",
    "kHasLocal", "kHasFree", "kHasCompare", "kBackwardJump", "kUnconditionalJump",
    "kScopeExit", "kLocalPair",
]
FLAG = {name: 1 << i for i, name in enumerate(FLAG_NAMES)}

# Control never falls through these (the compiler's "scope exits").
SCOPE_EXITS = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
UNCONDITIONAL_JUMPS = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                       "JUMP", "JUMP_NO_INTERRUPT"}


def cache_entries(op, name):
    table = opcode._inline_cache_entries
    if isinstance(table, dict):  # 3.13: keyed by name
        return table.get(name, 0)
    return table[op]


def name_shift(name):
    """Low bits of a name-index oparg that are flags, not index."""
    if name == "LOAD_GLOBAL":
        return 1  # 3.11+: bit 0 = push NULL before the global
    if name == "LOAD_ATTR" and sys.version_info >= (3, 12):
        return 1  # 3.12+: bit 0 = method load
    if name == "LOAD_SUPER_ATTR":
        return 2  # 3.12+: bit 0 = method load, bit 1 = two-argument form
    return 0


def compare_shift():
    """Low bits of COMPARE_OP's oparg that are not the cmp_op index."""
    if sys.version_info >= (3, 13):
        return 5
    if sys.version_info >= (3, 12):
        return 4
    return 0


def local_pair(name):
    """3.13's superinstructions (LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST,
    STORE_FAST_STORE_FAST) pack two local indices into one oparg, four bits
    each (dis.ArgResolver splits them as arg >> 4, arg & 15). `opcode` lists
    them in haslocal without saying so; their names are the only mark."""
    return name.count("FAST") == 2 and opcode.opmap.get(name) in opcode.haslocal


def compare_bool_bit():
    """3.13: COMPARE_OP's oparg bit 4 asks for a bool result (dis shows
    "bool(<)"); earlier versions have no such bit."""
    return 16 if sys.version_info >= (3, 13) else 0


def line_start_on_no_line():
    """3.13's dis.findlinestarts reports every change of line, a change to
    "no line" included (its lastline starts as False, not None); 3.11 and
    3.12 skip units without a line and compare with the last real line."""
    return sys.version_info >= (3, 13)


_SAMPLE = """
def f(o, a):
    g()
    o.m()
    for x in a:
        pass
class C:
    def h(self):
        return super().m()
"""


def sampled_reprs():
    """How this version's dis writes what it does not expose as data, read
    off dis.get_instructions on a small compiled sample:
     - the text around a name whose low oparg bit pushes NULL (LOAD_GLOBAL
       "NULL + g" up to 3.12, "g + NULL" in 3.13; LOAD_ATTR and
       LOAD_SUPER_ATTR "NULL|self + m" / "m + NULL|self"), per opcode;
     - whether jump targets are written as labels ("to L1", 3.13) or offsets."""
    flag_text = {}
    labels = False
    todo = [compile(_SAMPLE, "<sample>", "exec")]
    while todo:
        co = todo.pop()
        todo.extend(c for c in co.co_consts if isinstance(c, type(co)))
        for ins in dis.get_instructions(co):
            if ins.opcode in opcode.hasname and ins.arg is not None and (ins.arg & 1) \
                    and name_shift(ins.opname) and ins.argval != ins.argrepr:
                prefix, _, suffix = ins.argrepr.partition(ins.argval)
                flag_text[ins.opname] = (prefix, suffix)
            if ins.opcode in opcode.hasjrel and ins.argrepr.startswith("to L"):
                labels = True
    return flag_text, labels


def min_stack_size():
    """The least co_stacksize the compiler writes. 3.13 never writes 0, even
    for code that pushes nothing; read off the compiler on `def f(): raise`
    (RESUME, RAISE_VARARGS 0: no value is ever pushed)."""
    def f():
        raise  # noqa: PLE0704 -- never called
    return f.__code__.co_stacksize


def c_string(text):
    return "nullptr" if text is None else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def camel(name):
    return "k" + "".join(part.capitalize() for part in name.split("_"))


def counterpart(name):
    """The same jump in the other direction (3.11 has separate opcodes)."""
    swaps = [("FORWARD", "BACKWARD"), ("BACKWARD", "FORWARD")]
    for a, b in swaps:
        if a in name:
            other = name.replace(a, b)
            if other in opcode.opmap:
                return opcode.opmap[other]
    return -1


def main(out_path):
    sets = {
        "kHasConst": set(opcode.hasconst), "kHasName": set(opcode.hasname),
        "kHasJumpRelative": set(opcode.hasjrel), "kHasJumpAbsolute": set(opcode.hasjabs),
        "kHasLocal": set(opcode.haslocal), "kHasFree": set(opcode.hasfree),
        "kHasCompare": set(opcode.hascompare),
    }
    has_arg = set(getattr(opcode, "hasarg", [])) or {
        op for op in opcode.opmap.values() if op >= opcode.HAVE_ARGUMENT}
    deopt = list(range(256))
    for base, specialized in getattr(dis, "_specializations", {}).items():
        for spec in specialized:
            if spec in dis._all_opmap and dis._all_opmap[spec] < 256:
                deopt[dis._all_opmap[spec]] = opcode.opmap[base]
    # 3.12+: sys.monitoring swaps INSTRUMENTED_X in for X in the live code
    # (co_code never shows them; dis has no data for the pairing, the name
    # is the pairing). INSTRUMENTED_LINE and INSTRUMENTED_INSTRUCTION have no
    # base: the real instruction is kept aside, so they stay themselves and
    # the decoder refuses them by name.
    for name, op in opcode.opmap.items():
        base = name[len("INSTRUMENTED_"):]
        if name.startswith("INSTRUMENTED_") and op < 256 and opcode.opmap.get(base, 256) < 256:
            deopt[op] = opcode.opmap[base]
    flag_text, jump_labels = sampled_reprs()

    rows = []
    for op in range(256):
        name = opcode.opname[op]
        if name.startswith("<"):
            rows.append('  {nullptr, 0, 0, 0, -1, nullptr, nullptr},')
            continue
        flags = [f for f, members in sets.items() if op in members]
        if op in has_arg:
            flags.append("kHasArg")
        if "JUMP_BACKWARD" in name:  # dis._is_backward_jump's rule
            flags.append("kBackwardJump")
        if name in UNCONDITIONAL_JUMPS:
            flags.append("kUnconditionalJump")
        if name in SCOPE_EXITS:
            flags.append("kScopeExit")
        if local_pair(name):
            flags.append("kLocalPair")
        flag_expr = " | ".join(sorted(flags)) or "0"
        prefix, suffix = flag_text.get(name, (None, None))
        rows.append(f'  {{"{name}", {flag_expr}, {cache_entries(op, name)}, '
                    f'{name_shift(name)}, {counterpart(name)}, {c_string(prefix)}, '
                    f'{c_string(suffix)}}},')

    v = sys.version_info
    out = []
    out.append(f"// Generated by lib/bytecode/gen_opcode_table.py from CPython "
               f"{v.major}.{v.minor}.{v.micro} ({sys.executable}).")
    out.append("// DO NOT EDIT: rebuild against another interpreter instead.")
    out.append("// Included by lib/bytecode/opcodes.h inside namespace dynamo::bytecode.")
    out.append("")
    out.append("namespace generated {")
    out.append(f"inline constexpr int kPythonMajor = {v.major};")
    out.append(f"inline constexpr int kPythonMinor = {v.minor};")
    out.append(f"inline constexpr int kHaveArgument = {opcode.HAVE_ARGUMENT};")
    out.append(f"inline constexpr int kCompareShift = {compare_shift()};")
    # The compiler writes one location entry per instruction in 3.11 and
    # merges runs of instructions with equal locations from 3.12 on.
    merge = "true" if sys.version_info >= (3, 12) else "false"
    out.append(f"inline constexpr bool kMergeLocationRuns = {merge};")
    out.append(f"inline constexpr int kCompareBoolBit = {compare_bool_bit()};")
    out.append("inline constexpr bool kLineStartOnNoLine = "
               f"{'true' if line_start_on_no_line() else 'false'};")
    out.append(f"inline constexpr int kMinStackSize = {min_stack_size()};")
    out.append("// dis writes jump targets as labels (\"to L2\"), not offsets.")
    out.append(f"inline constexpr bool kJumpLabels = {'true' if jump_labels else 'false'};")
    out.append("")
    out.append("// Opcode numbers, named after CPython's in CamelCase (Python.h's macros")
    out.append("// would clash with the upper-case names).")
    for name, op in sorted(opcode.opmap.items(), key=lambda kv: kv[1]):
        if op < 256:
            out.append(f"inline constexpr int {camel(name)} = {op};")
    out.append("")
    out.append("// Presence tests for opcodes that come and go between versions.")
    for name, op in sorted(opcode.opmap.items(), key=lambda kv: kv[1]):
        if op < 256:
            out.append(f"#define DYNAMO_HAS_{name} 1")
    out.append("")
    out.append("inline constexpr OpcodeInfo kOpcodes[256] = {")
    out.extend(rows)
    out.append("};")
    out.append("")
    out.append("// Specialised (quickened) opcode -> its base opcode.")
    out.append("inline constexpr unsigned char kDeopt[256] = {")
    for i in range(0, 256, 16):
        out.append("  " + ", ".join(str(d) for d in deopt[i:i + 16]) + ",")
    out.append("};")
    out.append("")
    nb_ops = getattr(dis, "_nb_ops", None) or getattr(opcode, "_nb_ops", [])
    out.append("// BINARY_OP's oparg -> (NB_ name, operator symbol), from dis._nb_ops.")
    out.append(f"inline constexpr BinaryOpInfo kBinaryOps[{len(nb_ops)}] = {{")
    for nb_name, symbol in nb_ops:
        out.append(f'  {{"{nb_name}", "{symbol}"}},')
    out.append("};")
    out.append("")
    for n in (1, 2):
        descs = getattr(dis, f"_intrinsic_{n}_descs", None)
        if descs:
            out.append(f"// CALL_INTRINSIC_{n}'s oparg -> name, from dis._intrinsic_{n}_descs.")
            out.append(f"inline constexpr const char* kIntrinsic{n}[{len(descs)}] = {{")
            out.append("  " + ", ".join(c_string(d) for d in descs))
            out.append("};")
            out.append("")
    # FORMAT_VALUE's (3.11, 3.12) and CONVERT_VALUE's (3.13) conversion
    # names; 3.13's dis spells the tuple inline in ArgResolver, not as data.
    converters = [r for _v, r in getattr(dis, "FORMAT_VALUE_CONVERTERS", ())] or \
        ["", "str", "repr", "ascii"]
    out.append("// Value conversions (!s, !r, !a), from dis.FORMAT_VALUE_CONVERTERS.")
    out.append(f"inline constexpr const char* kConverters[{len(converters)}] = {{")
    out.append("  " + ", ".join(c_string(c) for c in converters))
    out.append("};")
    out.append("")
    function_flags = getattr(dis, "MAKE_FUNCTION_FLAGS", None) or dis.FUNCTION_ATTR_FLAGS
    out.append("// MAKE_FUNCTION's (3.11, 3.12) / SET_FUNCTION_ATTRIBUTE's (3.13) flag")
    out.append("// bits, from dis.MAKE_FUNCTION_FLAGS / dis.FUNCTION_ATTR_FLAGS.")
    out.append(f"inline constexpr const char* kFunctionFlags[{len(function_flags)}] = {{")
    out.append("  " + ", ".join(c_string(c) for c in function_flags))
    out.append("};")
    out.append("")
    out.append("// COMPARE_OP's comparison index -> symbol, from opcode.cmp_op.")
    out.append(f"inline constexpr const char* kCompareOps[{len(opcode.cmp_op)}] = {{")
    out.append("  " + ", ".join(f'"{c}"' for c in opcode.cmp_op))
    out.append("};")
    out.append("")
    out.append("}  // namespace generated")
    out.append("")
    out.append("// Cross-check against the target's own headers, where opcodes.cc includes")
    out.append("// Python.h and defines DYNAMO_CHECK_OPCODES_AGAINST_HEADERS.")
    out.append("#ifdef DYNAMO_CHECK_OPCODES_AGAINST_HEADERS")
    for name, op in sorted(opcode.opmap.items(), key=lambda kv: kv[1]):
        if op < 256:
            out.append(f"#ifdef {name}")
            out.append(f'static_assert(generated::{camel(name)} == {name}, "{name}");')
            out.append("#endif")
    out.append("#endif")
    with open(out_path, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
