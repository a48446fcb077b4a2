"""Writes bytecode_fuzz's seed inputs for the running interpreter: for each
seed function in bytecode_fuzz.cc (read from that file, so the two cannot
drift), its real co_code and exception table in the harness's input layout
([seed] [consts variant] [names variant] [u16 length] [code] [table]), plus
variants with co_consts / co_names resized.

    python test/fuzz/make_bytecode_seeds.py   # run once per CPython version
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
source = open(os.path.join(here, "bytecode_fuzz.cc")).read()
namespace = {"__name__": "seeds"}
exec(re.search(r'R"PY\((.*?)\)PY"', source, re.S).group(1), namespace)
tag = f"py{sys.version_info.major}{sys.version_info.minor}"
out = os.path.join(here, "bytecode", "seeds")
os.makedirs(out, exist_ok=True)
for i, code in enumerate(namespace["SEEDS"]):
    for variant in (0, 3) if i == 0 else (0,):
        body = code.co_code
        data = bytes([i, variant, variant]) + len(body).to_bytes(2, "little") + body + code.co_exceptiontable
        with open(os.path.join(out, f"{tag}-{code.co_name}-{variant}"), "wb") as f:
            f.write(data)
print(f"wrote {tag} seeds to {out}")
