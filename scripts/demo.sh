#!/usr/bin/env bash
# Mounts the bundled demo file (a versioned-hdf5 file with five versions of a 2-D float64
# dataset, gzip-compressed) and shows it with ls, od and numpy. Unmounts when done.
set -euo pipefail
cd "$(dirname "$0")/.."
demo=tests/testdata/fixtures/grid_2d_gzip.h5
mnt=$(mktemp -d /tmp/vh5fs-demo.XXXXXX)
./bin/vh5fs mount "$demo" "$mnt" &
pid=$!
trap 'fusermount3 -u "$mnt" 2>/dev/null; wait $pid; rmdir "$mnt"' EXIT
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.05; done
mountpoint -q "$mnt" || { echo "demo: mount did not come up" >&2; exit 1; }

set -x
ls -l "$mnt" "$mnt/versions"
readlink "$mnt/current"
ls -l "$mnt/versions/r1" "$mnt/current/"
od -A d -t f8 -N 48 "$mnt/current/temp"
getfattr --absolute-names -d -m '^user\.vh5fs\.(dtype|shape|chunks|fillvalue)$' "$mnt/current/temp"
/usr/bin/python3 - "$mnt" <<'PY'
import json, os, sys, numpy as np
mnt = sys.argv[1]
for v in ("r1", "r4", "r5"):
    path = f"{mnt}/versions/{v}/temp"
    dtype = os.getxattr(path, "user.vh5fs.dtype").decode()          # dtype and shape from xattrs
    shape = json.loads(os.getxattr(path, "user.vh5fs.shape"))
    a = np.fromfile(path, dtype=dtype).reshape(shape)
    print(v, a.shape, "corner:", a[:2, :4].round(3).tolist(), "mean: %.4f" % a.mean())
m = np.memmap(f"{mnt}/current/temp", dtype="<f8", mode="r").reshape(-1, 37)
print("memmap of current:", m.shape, m[-1, -3:])
PY
