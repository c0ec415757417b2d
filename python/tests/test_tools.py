"""scripts/ncu-source-summary on a small synthetic source-page CSV (the layout of `ncu --import R --page source --csv
--print-source sass`): totals, stall reasons, the execution-count groups and the top instructions."""
import csv
import gzip
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu-source-summary"

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "stall_barrier", "stall_wait", "stall_long_sb"]
# (SASS, samples, executed, barrier, wait, long_sb): two "roles", 400 and 800 executions, and a prologue run once a warp
BODY = [
    ("LDC R1, c[0x0][0x28]", 5, 16, 0, 5, 0),
    ("BAR.SYNC.DEFER_BLOCKING 0x1, 0x100", 2, 400, 0, 2, 0),
    ("BSSY B2, 0x10", 90, 400, 88, 2, 0),
    ("HMMA.16816.F32.BF16 R0, R4, R8, R0", 30, 400, 0, 30, 0),
    ("LDG.E R2, [R4.64]", 3, 800, 0, 3, 0),
    ("IADD3 R3, R2, R1, RZ", 60, 800, 0, 0, 60),
]


def write(path, kernels):
    with gzip.open(path, "wt", newline="") as f:
        w = csv.writer(f)
        for name in kernels:
            w.writerow(["Kernel Name", name])
            w.writerow(HEADER)
            for k, (sass, *nums) in enumerate(BODY):
                w.writerow([hex(0x1000 + 16 * k), "      " + sass, *map(str, nums)])


def run(*args):
    r = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def test_totals_roles_and_top(tmp_path):
    path = tmp_path / "sass.csv.gz"
    write(path, ["void fv::verify_wg_kernel_prod<bf16>(P)", "void fv::combine_kernel(P)"])
    rc, out, err = run(path, "--kernel", "verify", "--top", 2)
    assert rc == 0, err
    assert "combine_kernel" not in out
    assert "6 instructions, 190 warp samples" in out
    assert "barrier 88 (46.3%)" in out and "long_sb 60 (31.6%)" in out and "wait 42 (22.1%)" in out
    groups = [line.split() for line in out.splitlines() if line.startswith("    ") and "%" in line and ".." in line]
    # count, samples, share, instructions, index range; largest first
    assert groups[0] == ["400", "122", "64.2%", "3", "1..3"]
    assert groups[1] == ["800", "63", "33.2%", "2", "4..5"]
    assert groups[2] == ["16", "5", "2.6%", "1", "0..0"]
    top = [line.split() for line in out.splitlines() if "|" in line and line.split()[0].isdigit()]
    assert [t[:3] for t in top] == [["2", "90", "400"], ["5", "60", "800"]]  # BSSY, then IADD3
    assert top[0][-3:] == ["|", "barrier:88", "wait:2"] and top[1][-2:] == ["|", "long_sb:60"]


def test_roles_off_and_range(tmp_path):
    path = tmp_path / "sass.csv.gz"
    write(path, ["void fv::verify_kernel(P)"])
    rc, out, _ = run(path, "--roles", 0, "--from", 4, "--to", 5)
    assert rc == 0
    assert "by execution count" not in out
    assert "instructions 4..5: 63 warp samples (33.2% of the kernel's)" in out


def test_no_matching_kernel(tmp_path):
    path = tmp_path / "sass.csv.gz"
    write(path, ["void fv::combine_kernel(P)"])
    rc, _, err = run(path, "--kernel", "verify")
    assert rc == 1 and "no kernel matching 'verify'" in err
