"""cmsafe's Debian packages on one stack, installed: inside `scripts/rxe-vm [--stack NAME]
--overlay` (scripts/deb-test runs it), whose root is the suite's own, writable in the guest
only, with nothing of a source build of cmsafe in it (a /usr/local build is removed first):

  scripts/deb-suite-in-guest [PART...]     (default: every part, in this order)

target/deb/prev holds the previous version's packages and target/deb/pkgs this version's
(scripts/deb --prev built them for this suite); target/deb-test the programs scripts/deb-test
built on this machine in the same suite's root, with `pkg-config --cflags --libs cmsafe` after
installing the same packages with apt-get: old/ (the examples, against the previous version),
c-tests/ (the C and C++ tests) and preload-tests/ (the misuse programs, raw librdmacm ones).

  install   apt-get installs the previous version's libcmsafe0.2, libcmsafe-dev and cmsafe-tools
            from their files: dpkg says each is installed at that version; the loader's cache
            has libcmsafe.so.0.2 in the multiarch libdir; pkg-config says the version, /usr's
            include and lib directories and -lcmsafe -lrdmacm; the headers are /usr/include's;
            cmsafe-audit is /usr/bin's and the preload is in its private directory, out of the
            loader's cache
  upgrade   apt-get installs this version's over them: each package at the new version; the
            previous version's token_server and token_client (built against it) still load,
            their cmsafe calls bound at CMSAFE_0.2, and run on the real stack
  c-tests   c-tests/run-in-guest on the programs of target/deb-test/c-tests (the Rust API's
            test is cargo's, counted apart)
  misuse    scripts/preload-misuse-tests, audit and safe through /usr/bin/cmsafe-audit and the
            installed preload (PRELOAD_MISUSE_ONLY is passed on)
  real      scripts/preload-real-programs audit safe, through /usr/bin/cmsafe-audit
  purge     apt-get purge of the three: none left in dpkg's database, nothing left in the loader's
            cache, and the entries of every directory the packages put a file in, and all of
            /etc and /var/lib/dpkg/info, as they were before the install (dpkg's own -old
            backups of its database aside)

install, upgrade and purge always run (the others need the packages in place). The summary goes
to stdout and target/deb-suite/summary.txt, as stack-suite-in-guest's: a first line naming the
stack and the versions, then "part PART: P passed, F failed, A apart" per part with its
failures. Exits non-zero when a part failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Sequence

from . import guest, proc
from .stack_suite import Suite, first_line, stack_name

PROG = "deb-suite-in-guest"
PARTS = ("install", "upgrade", "c-tests", "misuse", "real", "purge")
OUT = "target/deb-suite"
PKGS = ("libcmsafe0.2", "libcmsafe-dev", "cmsafe-tools")
SONAME = "libcmsafe.so.0.2"
EMPTY_LISTS = os.path.abspath(os.path.join(OUT, "lists"))  # apt's package lists there: none
# dpkg's and the loader's own files, which installing anything changes.
DPKG_OWN = ("/var/lib/dpkg/status-old", "/var/lib/dpkg/diversions-old",
            "/var/lib/dpkg/statoverride-old", "/var/lib/dpkg/triggers/Unincorp")


def package_files(directory: str) -> list[str]:
    """The three packages' files in DIRECTORY (their -dbgsym packages left out)."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    return [os.path.join(directory, n) for n in names
            if n.endswith(".deb") and n.split("_")[0] in PKGS]


def deb_dirs(debs: Sequence[str]) -> set[str]:
    """The directories the packages put anything in (dpkg-deb -c), with their parents."""
    dirs = set()
    for f in debs:
        out = subprocess.run(["dpkg-deb", "-c", f], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 6:
                path = fields[5].lstrip(".").rstrip("/") or "/"
                d = path if line.startswith("d") else os.path.dirname(path)
                while d not in ("", "/"):
                    dirs.add(d)
                    d = os.path.dirname(d)
    return dirs


def tree_listing(dirs: Sequence[str], recursive: Sequence[str]) -> set[str]:
    """The entries of each of DIRS (not below), and every path under RECURSIVE: what a purge
    must leave as the install found it."""
    seen = set()
    for d in dirs:
        if os.path.isdir(d):
            seen.add("d " + d)
            seen.update("e " + os.path.join(d, n) for n in os.listdir(d))
        else:
            seen.add("- " + d)
    for top in recursive:
        for d, subdirs, files in os.walk(top):
            seen.update("e " + os.path.join(d, n) for n in subdirs + files)
    return {x for x in seen if x[2:] not in DPKG_OWN}


def leftovers(before: set[str], after: set[str]) -> list[str]:
    """What a purge left: paths there after it and not before, and paths it took away."""
    return (["left: " + p[2:] for p in sorted(after - before) if not p.startswith("- ")] +
            ["gone: " + p[2:] for p in sorted(before - after) if not p.startswith("- ")])


def resolved(listing: str, soname: str) -> str:
    """The path `ldconfig -p` or ldd gives for SONAME ("NAME ... => PATH"), "" when none."""
    for line in listing.splitlines():
        f = line.split()
        if f and f[0] == soname and "=>" in f:
            return f[f.index("=>") + 1] if f.index("=>") + 1 < len(f) else ""
    return ""


def same_file(a: str, b: str) -> bool:
    """Whether A and B are one file: /lib is /usr/lib on a merged-/usr root."""
    return bool(a) and os.path.exists(a) and os.path.realpath(a) == os.path.realpath(b)


def on_overlay_root() -> bool:
    """Whether / is an overlay (rxe-vm --overlay): the only root this suite may install into."""
    for line in proc.read_lines("/proc/self/mountinfo"):
        f = line.split()
        if len(f) > 4 and f[4] == "/":
            dash = f.index("-") if "-" in f else -1
            return dash > 0 and f[dash + 1] == "overlay"
    return False


class Packages:
    def __init__(self, suite: Suite, multiarch: str):
        self.s = suite
        self.multiarch = multiarch
        self.log = os.path.join(OUT, "packages.log")
        self.passed = self.failed = 0

    def run(self, argv: Sequence[str], env: dict | None = None) -> tuple[int, str]:
        with open(self.log, "a") as f:
            f.write("$ %s\n" % " ".join(argv))
        r = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env)
        out = r.stdout.decode("utf-8", "replace")
        with open(self.log, "a") as f:
            f.write(out)
        return r.returncode, out

    def check(self, what: str, ok: bool, detail: str = "") -> bool:
        with open(self.log, "a") as f:
            f.write("%s %s%s\n" % ("ok  " if ok else "FAIL", what, ": " + detail if detail else ""))
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.s.line(("  FAIL %s%s" % (what, ": " + detail if detail else ""))[:300])
        return ok

    def part(self, name: str) -> bool:
        ok = self.failed == 0
        self.s.line("part %s: %d passed, %d failed, 0 apart" % (name, self.passed, self.failed))
        self.passed = self.failed = 0
        return ok

    def apt(self, files: Sequence[str], purge: bool = False) -> int:
        """apt-get, with no package list but what is installed: the packages' dependencies must
        be met by the root as it is (the guest has no network), and reading the archive's lists
        costs the emulated guest minutes."""
        env = proc.environment({"DEBIAN_FRONTEND": "noninteractive"})
        os.makedirs(EMPTY_LISTS + "/partial", exist_ok=True)
        argv = ["apt-get", "-y", "-q", "--no-install-recommends", "-o",
                "Dir::State::Lists=" + EMPTY_LISTS]
        argv += ["purge"] + list(PKGS) if purge else ["install"] + ["./" + f for f in files]
        return self.run(argv, env)[0]

    def versions(self) -> dict[str, str]:
        out = self.run(["dpkg-query", "-W", "-f=${Package} ${Status} ${Version}\\n"] + list(PKGS))[1]
        have = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 5 and f[1:4] == ["install", "ok", "installed"]:
                have[f[0]] = f[4]
        return have

    def installed_at(self, files: Sequence[str], what: str) -> None:
        want = {os.path.basename(f).split("_")[0]: os.path.basename(f).split("_")[1].replace("%3a", ":")
                for f in files}
        have = self.versions()
        for p in PKGS:
            self.check("%s %s at %s" % (what, p, want.get(p)), have.get(p) == want.get(p),
                       "dpkg says %s" % have.get(p, "not installed"))

    def installed_layout(self) -> None:
        libdir = "/usr/lib/" + self.multiarch
        cache = self.run(["/sbin/ldconfig", "-p"])[1]
        found = resolved(cache, SONAME)
        self.check("the loader's cache has %s in %s" % (SONAME, libdir),
                   same_file(found, "%s/%s" % (libdir, SONAME)), found)
        self.check("the preload is not in the loader's cache", "libcmsafe_preload" not in cache)
        rc, ver = self.run(["pkg-config", "--modversion", "cmsafe"])
        self.check("pkg-config --modversion cmsafe", rc == 0 and ver.strip() != "", ver.strip())
        rc, libs = self.run(["pkg-config", "--libs", "cmsafe"])
        self.check("pkg-config --libs cmsafe: -lcmsafe -lrdmacm, no -L outside the libdir",
                   rc == 0 and "-lcmsafe" in libs.split() and "-lrdmacm" in libs.split()
                   and all(not x.startswith("-L") or x == "-L" + libdir for x in libs.split()),
                   libs.strip())
        rc, var = self.run(["pkg-config", "--variable=libdir", "cmsafe"])
        self.check("cmsafe.pc's libdir is %s" % libdir, var.strip() == libdir, var.strip())
        rc, inc = self.run(["pkg-config", "--variable=includedir", "cmsafe"])
        self.check("cmsafe.pc's includedir is /usr/include", inc.strip() == "/usr/include",
                   inc.strip())
        for h in ("cmsafe.h", "cmsafe.hpp", "cmsafe_compat.h"):
            self.check("/usr/include/%s" % h, os.path.isfile("/usr/include/" + h))
        self.check("cmsafe-audit is /usr/bin's", shutil.which("cmsafe-audit") == "/usr/bin/cmsafe-audit",
                   str(shutil.which("cmsafe-audit")))
        self.check("the preload is in %s/cmsafe" % libdir,
                   os.path.isfile("%s/cmsafe/libcmsafe_preload.so" % libdir))

    def old_programs(self, addr: str) -> None:
        """The previous version's examples, after the upgrade: still bound at CMSAFE_0.2, and
        running on the real stack on the new library."""
        old = "target/deb-test/old"
        rc, syms = self.run(["objdump", "-T", os.path.join(old, "token_server")])
        self.check("the previous version's token_server calls cmsafe at CMSAFE_0.2",
                   rc == 0 and any("CMSAFE_0.2" in x and "cmsafe_get_event" in x
                                   for x in syms.splitlines()))
        rc, ldd = self.run(["ldd", os.path.join(old, "token_server")])
        found = resolved(ldd, SONAME)
        self.check("it loads the upgraded /usr/lib/%s/%s" % (self.multiarch, SONAME),
                   same_file(found, "/usr/lib/%s/%s" % (self.multiarch, SONAME)), found)
        script = ("timeout 60 %s/token_server %s 7491 0x5678 5 & s=$!; sleep 1; "
                  "timeout 60 %s/token_client %s 7491 0x5678 5 && wait $s" % (old, addr, old, addr))
        rc, _ = self.run(["sh", "-c", script])
        self.check("the previous version's token_server and token_client on the real stack",
                   rc == 0, "exit %d" % rc)


def main(argv: list[str]) -> int:
    os.chdir(guest.project_root())
    addr = os.environ.get("RXE_ADDR")
    if not addr:
        guest.die(PROG, "run this inside scripts/rxe-vm --overlay")
    if not on_overlay_root():
        guest.die(PROG, "/ is not an overlay: the packages go only into rxe-vm --overlay's root")
    parts = list(argv) or list(PARTS)
    for p in parts:
        if p not in PARTS:
            guest.die(PROG, "unknown part %s (%s)" % (p, " ".join(PARTS)))
    prev, pkgs = package_files("target/deb/prev"), package_files("target/deb/pkgs")
    if len(prev) != len(PKGS) or len(pkgs) != len(PKGS):
        guest.die(PROG, "target/deb/prev and target/deb/pkgs need the three packages each "
                        "(scripts/deb --prev)")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    arch = first_line(["dpkg", "--print-architecture"])
    multiarch = first_line(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]) or \
        {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}.get(arch, "")
    stack, _ = stack_name("\n".join(proc.read_lines("/proc/cmdline")),
                          proc.read_lines("/etc/os-release"))
    suite = Suite(addr, OUT)
    suite.line("packages %s: kernel %s, %s, from %s to %s" % (
        stack, os.uname().release, arch, os.path.basename(prev[0]).split("_")[1],
        os.path.basename(pkgs[0]).split("_")[1]))
    p = Packages(suite, multiarch)
    bad = 0

    # A source build's files in /usr/local would come first in pkg-config's and the loader's
    # paths: this root is the packages' alone (the overlay keeps the cached root untouched).
    for d in ("/usr/local/lib", "/usr/local/include", "/usr/local/bin", "/usr/local/share/man"):
        for base, _, files in os.walk(d):
            for n in files:
                if "cmsafe" in n:
                    os.unlink(os.path.join(base, n))
    subprocess.call(["/sbin/ldconfig"])
    # man-db's trigger would index every manual page of the root, minutes in the emulated guest:
    # its switch (the file debconf's man-db/auto-update writes) is off in this root.
    if os.path.exists("/var/lib/man-db/auto-update"):
        os.unlink("/var/lib/man-db/auto-update")
    watched = sorted(deb_dirs(prev + pkgs))
    recursive = ("/etc", "/var/lib/dpkg/info")
    before = tree_listing(watched, recursive)

    rc = p.apt(prev)
    p.check("apt-get install the previous version", rc == 0, "exit %d" % rc)
    p.installed_at(prev, "installed:")
    p.installed_layout()
    bad += not p.part("install")

    rc = p.apt(pkgs)
    p.check("apt-get install this version over it", rc == 0, "exit %d" % rc)
    p.installed_at(pkgs, "upgraded:")
    p.installed_layout()
    p.old_programs(addr)
    bad += not p.part("upgrade")

    installed = {"CMSAFE_TEST_AUDIT": "/usr/bin/cmsafe-audit",
                 "CMSAFE_TEST_PRELOAD": "/usr/lib/%s/cmsafe/libcmsafe_preload.so" % multiarch}
    for part in parts:
        ok = True
        if part == "c-tests":
            os.environ["CTESTS_DIR"] = "target/deb-test/c-tests"
            ok = suite.part_script(part, ["c-tests/run-in-guest"])
        elif part == "misuse":
            os.environ.update(installed)
            os.environ["PRELOAD_MISUSE_BIN"] = "target/deb-test/preload-tests"
            ok = suite.part_script(part, ["scripts/preload-misuse-tests", "audit", "safe"])
        elif part == "real":
            os.environ.update(installed)
            ok = suite.part_script(part, ["scripts/preload-real-programs", "audit", "safe"])
        bad += not ok

    rc = p.apt([], purge=True)
    p.check("apt-get purge the three", rc == 0, "exit %d" % rc)
    left = p.versions()
    p.check("dpkg knows none of them", not left, " ".join(sorted(left)))
    p.check("the loader's cache has no %s" % SONAME, SONAME not in p.run(["/sbin/ldconfig", "-p"])[1])
    diff = leftovers(before, tree_listing(watched, recursive))
    p.check("the %d directories the packages use, /etc and /var/lib/dpkg/info as before the "
            "install" % len(watched), not diff, "; ".join(diff[:8]))
    bad += not p.part("purge")
    suite.line("parts failed: %d" % bad)
    sys.stdout.flush()
    return 1 if bad else 0
