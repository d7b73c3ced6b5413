#!/usr/bin/env python3
"""paddockd --check-config and paddock-pool --check-config as a user runs them.

A broker config with several problems (in broker.toml and in the policy file it names): exit 3,
each problem on its own line with file:line, nothing started. A clean config: exit 0 and
"config OK: " with a summary. The same for the pool.

usage: check_config_cli.py PADDOCKD PADDOCK_POOL
"""

import os
import subprocess
import sys
import tempfile

failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)


def run(argv, home):
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_DATA_HOME=os.path.join(home, "data"), XDG_RUNTIME_DIR=os.path.join(home, "run"))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def broker(paddockd, tmp):
    bad = os.path.join(tmp, "broker.toml")
    policy = os.path.join(tmp, "policy.toml")
    write(bad, "\n".join([
        "workers = 2",                       # 1
        "wokers = 3",                        # 2: unknown key
        "lease_ms = \"long\"",               # 3: wrong type
        "log_level = \"loud\"",              # 4: not a level
        "policy_file = \"policy.toml\"",     # 5
        "[[pool]]",                          # 6
        "name = \"east\"",                   # 7
        "endpoint = \"192.0.2.10:7701\"",    # 8
        "tls_ca = \"missing-ca.pem\"",       # 9: unreadable (reported with the [[pool]] line)
        "[prices]",                          # 10
        "storage_per_gib_month = -1",        # 11: negative
        "",
    ]))
    write(policy, "\n".join([
        "[review]",                          # 1
        "expiry_seconds = 0",                # 2: below 1
        "[[tier_rule]]",                     # 3: no tier
        "agent = \"bot\"",                   # 4
        "[[tier_rule]]",                     # 5
        "tier = \"lite\"",                   # 6
        "colour = \"red\"",                  # 7: unknown key
        "",
    ]))
    code, out, err = run([paddockd, "--check-config", "--config", bad], tmp)
    expect(code == 3, f"paddockd --check-config with problems exited {code}, expected 3\n{err}")
    expect("config OK" not in out, "paddockd printed config OK for a config with problems")
    for where, what in [(bad + ":2", "wokers"), (bad + ":3", "lease_ms"), (bad + ":4", "log_level"),
                        (bad + ":6", "tls_ca"), (bad + ":11", "storage_per_gib_month"),
                        (policy + ":2", "expiry_seconds"), (policy + ":3", "no tier"), (policy + ":7", "colour")]:
        lines = [line for line in err.splitlines() if where + ":" in line and what in line]
        expect(len(lines) == 1, f"paddockd --check-config: expected one line naming {where} and {what}:\n{err}")
    expect("8 configuration problems" in err, f"paddockd --check-config: expected a count of 8 problems:\n{err}")
    expect(not os.path.exists(os.path.join(tmp, "data", "paddock")), "paddockd --check-config created the data dir")

    good = os.path.join(tmp, "good.toml")
    write(good, "allow_local_execution = true\n[[pool]]\nname = \"local\"\nendpoint = \"127.0.0.1:7701\"\n")
    code, out, err = run([paddockd, "--check-config", "--config", good], tmp)
    expect(code == 0, f"paddockd --check-config with a clean config exited {code}\n{err}")
    expect(out.startswith("config OK: " + good) and "local at 127.0.0.1:7701" in out,
           f"paddockd --check-config: expected 'config OK: {good}' and the pool in the summary:\n{out}")

    # Flags count: --pool replaces the file's pools, so the same check now refuses local execution.
    code, out, err = run([paddockd, "--check-config", "--config", os.path.join(tmp, "nolocal.toml")], tmp)
    expect(code == 3 and "does not exist" in err, f"a missing --config file: exit {code}\n{err}")
    code, out, err = run([paddockd, "--check-config", "--pool", "here=127.0.0.1:7701"], tmp)
    expect(code == 0 and "the embedded default" in out, f"embedded default with --pool: exit {code}\n{out}{err}")


def pool(pool_bin, tmp):
    bad = os.path.join(tmp, "pool.toml")
    write(bad, "\n".join([
        "listen = \"nowhere\"",              # 1: not host:port
        "warm = 3",                          # 2: unknown key
        "[[tier]]",                          # 3
        "name = \"lite\"",                   # 4
        "runtime = \"docker\"",              # 5: unknown runtime
        "memory_mb = 0",                     # 6: below 1
        "allowlist = [\"exa mple\"]",        # 7: not a host
        "",
    ]))
    code, out, err = run([pool_bin, "--check-config", "--config", bad], tmp)
    expect(code == 3, f"paddock-pool --check-config with problems exited {code}, expected 3\n{err}")
    for where, what in [(":1:", "listen"), (":2:", "warm"), (":5:", "docker"), (":6:", "memory_mb"),
                        (":7:", "allowlist")]:
        lines = [line for line in err.splitlines() if bad + where in line and what in line]
        expect(len(lines) >= 1, f"paddock-pool --check-config: expected a line naming {bad}{where} and {what}:\n{err}")

    # A runtime that is not on PATH, and an init that is not there.
    good = os.path.join(tmp, "good-pool.toml")
    write(good, "[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\n")
    code, out, err = run([pool_bin, "--check-config", "--config", good, "--init-path", os.path.join(tmp, "no-init")],
                         tmp)
    expect(code == 3 and "sandbox init" in err, f"paddock-pool: a missing init: exit {code}\n{err}")
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = tmp
    code, out, err = run([pool_bin, "--check-config", "--config", good], tmp)
    os.environ["PATH"] = env_path
    expect(code == 3 and "tier 'lite'" in err and "bwrap" in err, f"paddock-pool: bwrap not on PATH: exit {code}\n{err}")
    code, out, err = run([pool_bin, "--check-config", "--config", good, "--state-dir", os.path.join(tmp, "state")], tmp)
    expect(code == 0 and out.startswith("config OK: ") and "lite (bwrap" in out,
           f"paddock-pool --check-config with a clean config: exit {code}\n{out}{err}")
    expect(not os.path.exists(os.path.join(tmp, "state")), "paddock-pool --check-config created the state dir")


def main():
    paddockd, pool_bin = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        broker(paddockd, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        pool(pool_bin, tmp)
    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print("check_config_cli: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
