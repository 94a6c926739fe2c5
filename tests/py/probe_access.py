#!/usr/bin/python3
"""Tries file operations and reports, for each, "ok" (with what it read) or the errno's
name; tests/perm_test.go runs it as another user to see what the kernel lets through.

usage: probe_access.py < OPS.json > RESULTS.json

OPS is a JSON list of [op, path, args...]:
  ["stat", P]                 os.stat; result "ok" and "mode"/"uid"/"gid"
  ["list", P]                 os.listdir; "names"
  ["read", P]                 the whole file; "hex"
  ["write", P]                open O_WRONLY (no data written)
  ["truncate", P, N]          truncate(2) by path
  ["getxattr", P, NAME]       "value"
  ["setxattr", P, NAME, VAL]
Each result is {"op": ..., "path": ..., "result": "ok" | "EACCES" | ...} plus the fields above.
"""
import errno
import json
import os
import sys


def run(op):
    kind, path, args = op[0], op[1], op[2:]
    out = {"op": kind, "path": path}
    try:
        if kind == "stat":
            st = os.stat(path)
            out.update(mode=st.st_mode, uid=st.st_uid, gid=st.st_gid)
        elif kind == "list":
            out["names"] = sorted(os.listdir(path))
        elif kind == "read":
            with open(path, "rb") as f:
                out["hex"] = f.read().hex()
        elif kind == "write":
            os.close(os.open(path, os.O_WRONLY))
        elif kind == "truncate":
            os.truncate(path, int(args[0]))
        elif kind == "getxattr":
            out["value"] = os.getxattr(path, args[0]).decode("utf-8", "replace")
        elif kind == "setxattr":
            os.setxattr(path, args[0], args[1].encode())
        else:
            raise SystemExit("unknown op %r" % kind)
        out["result"] = "ok"
    except OSError as e:
        out["result"] = errno.errorcode.get(e.errno, str(e.errno))
    return out


def main():
    ops = json.load(sys.stdin)
    json.dump([run(op) for op in ops], sys.stdout)


if __name__ == "__main__":
    main()
