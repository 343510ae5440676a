#!/usr/bin/env python3
"""Run one libFuzzer target until it has used a budget of CPU time, not wall time.

libFuzzer's -max_total_time counts wall-clock seconds, so on a shared machine a one-hour
campaign can get only minutes of a core. This wrapper starts the target in fork mode (crashes
and timeouts recorded, fuzzing continues) and samples the CPU time of the whole process tree
every few seconds: the parent's own and reaped-children time from /proc/<pid>/stat, plus every
live descendant's. It stops the campaign (SIGINT, so libFuzzer prints its final figures) once
that total reaches --cpu-seconds (SIGINT to its process group, so the running job stops
too), and prints one summary line at the end.

Usage (from fuzz/, after `cargo +nightly fuzz build`):

    python3 campaign.py proto_endpoint --cpu-seconds 3600 --workdir /tmp/fz

Figures it prints: CPU seconds, wall seconds, libFuzzer's last "#runs" status, the number of
crash/timeout/oom artifacts written.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_DIR = "target/x86_64-unknown-linux-gnu/release"


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name, or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; everything after the last ')' is fixed.
    return text[text.rindex(")") + 2 :].split()


def children_of():
    """Map pid -> list of child pids, from one pass over /proc."""
    tree = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(int(name))
        if fields is None:
            continue
        tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def tree_cpu_seconds(root):
    """CPU seconds of root (own + reaped children) plus every live descendant's own time."""
    tree = children_of()
    total = 0
    stack = [(root, True)]
    while stack:
        pid, with_reaped = stack.pop()
        fields = stat_fields(pid)
        if fields is None:
            continue
        # utime, stime, cutime, cstime are fields 14-17 of stat, 12-15 after the name.
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        total += utime + stime
        # Reaped children's time is counted once, where it was reaped; live children are
        # counted by their own utime+stime below, so every tick is counted exactly once.
        total += cutime + cstime
        stack.extend((child, True) for child in tree.get(pid, []))
    return total / CLK_TCK


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="fuzz target name (a binary under fuzz/%s)" % TARGET_DIR)
    parser.add_argument("--cpu-seconds", type=float, default=3600.0,
                        help="CPU time of the whole process tree to spend (default 3600)")
    parser.add_argument("--workdir", default="/tmp/fz",
                        help="where the new corpus (<workdir>/<target>) and artifacts "
                             "(<workdir>/art/<target>/) go; default /tmp/fz")
    parser.add_argument("--timeout", type=int, default=60,
                        help="libFuzzer -timeout per input, seconds (default 60: the campaign "
                             "runs at low priority beside builds, a starved input is not a hang)")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between CPU samples")
    parser.add_argument("--binary-dir", default=TARGET_DIR,
                        help="where the fuzz binary is (default %(default)s, relative to fuzz/): "
                             "a build in another --target-dir lets a changed target run while "
                             "campaigns of the others use theirs")
    args = parser.parse_args()
    if args.cpu_seconds <= 0 or args.cpu_seconds != args.cpu_seconds:
        parser.error("--cpu-seconds must be a positive number of seconds, e.g. 3600")
    if args.sample <= 0:
        parser.error("--sample must be a positive number of seconds, e.g. 5")

    binary = os.path.join(args.binary_dir, args.target)
    if not os.access(binary, os.X_OK):
        sys.exit(f"campaign: no fuzz binary at fuzz/{binary}; run `cargo +nightly fuzz build` "
                 f"in fuzz/ first (targets: ls fuzz/fuzz_targets)")
    corpus_new = os.path.join(args.workdir, args.target)
    artifacts = os.path.join(args.workdir, "art", args.target) + "/"
    os.makedirs(corpus_new, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    log_path = os.path.join(args.workdir, f"{args.target}.log")

    command = [binary, corpus_new, os.path.join("corpus", args.target), "-fork=1",
               "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1",
               f"-timeout={args.timeout}", "-max_len=8192", "-rss_limit_mb=1024",
               # Wall-clock backstop far beyond the CPU budget: the CPU budget is what stops it.
               f"-max_total_time={int(args.cpu_seconds * 20)}", "-print_final_stats=1",
               f"-artifact_prefix={artifacts}"]
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write("# " + " ".join(command) + "\n")
        log.flush()
        # Its own process group, so the stop reaches the running fork-mode job too (the parent
        # alone waits for its job to end, which can take minutes).
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        cpu = 0.0
        while proc.poll() is None:
            time.sleep(args.sample)
            cpu = max(cpu, tree_cpu_seconds(proc.pid))
            if cpu >= args.cpu_seconds:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                break
    wall = time.monotonic() - start
    runs = "?"
    with open(log_path, errors="replace") as log:
        for line in log:
            found = re.match(r"#(\d+)", line)
            if found:
                runs = found.group(1)
    found = sorted(os.listdir(artifacts))
    print(f"{args.target}: cpu {cpu:.0f} s, wall {wall:.0f} s, last status #{runs}, "
          f"artifacts {len(found)} {found[:5]}, exit {proc.returncode}, log {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
