#!/usr/bin/env python3
"""Release tooling for scripts/release: licenses, the native archive, the npm package tree.

Python 3 standard library only (no network, no third-party modules). Three subcommands:

  licenses  collects the license text of every crate in the shipped dependency graph from
            `cargo metadata` JSON and each crate's source directory, checks every crate's
            license expression against packaging/license-allowlist.json, and adds bundled C
            sources' notices (SQLite's public-domain blessing), the Rust standard library's
            copyright file and this project's own LICENSE. Fails, naming every offending
            crate, when a crate has no license text or a license outside the allow-list.
  bundle    writes manifest.json, SHA256SUMS and the reproducible
            browser-pilot-<version>-<target>.tar.gz plus its .sha256.
  npm       lays out the browser-pilot-cli package tree (npm pack runs on it afterwards).

It reads and writes only the paths it is given. Owns the archive layout and the manifest
shape (docs/release.md, docs/release-manifest.schema.json); the executable's version and
protocol data come from `browser-pilot --version --json`, never from here.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import struct
import sys
import tarfile

EXECUTABLES = ("browser-pilot", "bp", "browser-pilot-conformance")
MANIFEST_SCHEMA_VERSION = 1
LICENSE_FILE_NAME = re.compile(r"^(LICEN[CS]E|COPYING|COPYRIGHT|UNLICENSE|NOTICE)", re.IGNORECASE)


class ReleaseError(Exception):
    """A release input that must stop the build; the message names what to fix."""


# --- licenses ------------------------------------------------------------------------------


def spdx_tokens(expression):
    """Splits an SPDX expression into tokens; the old `A/B` form counts as `A OR B`."""
    spaced = expression.replace("(", " ( ").replace(")", " ) ").replace("/", " OR ")
    return spaced.split()


def spdx_allowed(expression, allowed, exceptions):
    """Whether some choice the expression offers uses only allowed licenses.

    Grammar: or := and ("OR" and)*; and := term ("AND" term)*; term := "(" or ")" | ID
    ["WITH" EXCEPTION]. A malformed expression is not allowed.
    """
    tokens = spdx_tokens(expression)
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def take():
        nonlocal position
        token = peek()
        if token is None:
            raise ValueError("unexpected end")
        position += 1
        return token

    def parse_or():
        result = parse_and()
        while peek() == "OR":
            take()
            right = parse_and()
            result = result or right
        return result

    def parse_and():
        result = parse_term()
        while peek() == "AND":
            take()
            right = parse_term()
            result = result and right
        return result

    def parse_term():
        token = take()
        if token == "(":
            result = parse_or()
            if take() != ")":
                raise ValueError("unbalanced parenthesis")
            return result
        if token in ("AND", "OR", "WITH", ")"):
            raise ValueError(f"unexpected {token}")
        if peek() == "WITH":
            take()
            exception = take()
            return token in allowed and exception in exceptions
        return token in allowed

    try:
        result = parse_or()
    except ValueError:
        return False
    return result and position == len(tokens)


def shipped_packages(metadata):
    """The packages of the shipped graph: the root and everything reached by normal
    (non-dev, non-build) dependency edges, as metadata package objects sorted by name/version."""
    resolve = metadata.get("resolve") or {}
    root = resolve.get("root")
    if root is None:
        raise ReleaseError("cargo metadata has no resolve root (run it in the package directory)")
    nodes = {node["id"]: node for node in resolve.get("nodes", [])}
    packages = {package["id"]: package for package in metadata.get("packages", [])}
    seen = set()
    pending = [root]
    while pending:
        package_id = pending.pop()
        if package_id in seen:
            continue
        seen.add(package_id)
        for dep in nodes.get(package_id, {}).get("deps", []):
            if any(kind.get("kind") is None for kind in dep.get("dep_kinds", [])):
                pending.append(dep["pkg"])
    missing = sorted(seen - packages.keys())
    if missing:
        raise ReleaseError(f"cargo metadata lacks packages {missing}")
    shipped = [packages[package_id] for package_id in seen if package_id != root]
    return packages[root], sorted(shipped, key=lambda p: (p["name"], p["version"]))


def license_files(package):
    """The license texts a crate ships: its top-level LICENSE*/COPYING*/NOTICE*/... files and
    the `license-file` its manifest names. Paths relative to the crate directory, sorted."""
    crate_dir = os.path.dirname(package["manifest_path"])
    found = set()
    try:
        names = os.listdir(crate_dir)
    except OSError:
        names = []
    for name in names:
        if LICENSE_FILE_NAME.match(name) and os.path.isfile(os.path.join(crate_dir, name)):
            found.add(name)
    named = package.get("license_file")
    if named and os.path.isfile(os.path.join(crate_dir, named)):
        found.add(os.path.normpath(named))
    return crate_dir, sorted(found)


def leading_comment(text):
    """The first C comment block of a source file, without its `**` decoration: how SQLite
    states its public-domain dedication."""
    match = re.match(r"\s*/\*(.*?)\*/", text, re.DOTALL)
    if not match:
        return None
    lines = []
    for line in match.group(1).splitlines():
        line = re.sub(r"^\s*\*\*? ?", "", line)
        if re.fullmatch(r"\*+", line.strip()):
            break
        lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"


def collect_licenses(metadata, allowlist, out_dir, project_license=None, rust_doc=None):
    """Writes out_dir/<crate>-<version>/<license files>, the bundled notices, the project's and
    the Rust standard library's license, and out_dir/index.json. Raises ReleaseError naming
    every crate without license text or with a license outside the allow-list."""
    allowed = set(allowlist.get("licenses", []))
    exceptions = set(allowlist.get("exceptions", []))
    bundled = allowlist.get("bundled", {})
    root, packages = shipped_packages(metadata)
    problems = []
    index = []
    copies = []
    for package in packages:
        label = f"{package['name']} {package['version']}"
        expression = package.get("license")
        if not expression:
            problems.append(f"{label}: no SPDX license expression in its Cargo.toml")
        elif not spdx_allowed(expression, allowed, exceptions):
            problems.append(
                f"{label}: license {expression!r} is outside packaging/license-allowlist.json"
            )
        crate_dir, files = license_files(package)
        if not files:
            problems.append(f"{label}: no license text (LICENSE*, COPYING*, ...) in its source")
        entry_dir = f"{package['name']}-{package['version']}"
        entry = {
            "name": package["name"],
            "version": package["version"],
            "license": expression,
            "files": [f"{entry_dir}/{name}" for name in files],
        }
        for name in files:
            copies.append((os.path.join(crate_dir, name), os.path.join(entry_dir, name)))
        notice = bundled.get(package["name"])
        if notice:
            source = os.path.join(crate_dir, notice["file"])
            try:
                with open(source, encoding="utf-8") as handle:
                    text = leading_comment(handle.read())
            except OSError:
                text = None
            if not text or notice.get("must_contain", "") not in text:
                problems.append(f"{label}: bundled notice {notice['file']} not found")
            else:
                target = f"{notice['name']}/NOTICE"
                copies.append((None, target, text))
                index.append(
                    {
                        "name": notice["name"],
                        "version": None,
                        "license": notice["license"],
                        "bundledBy": package["name"],
                        "files": [target],
                    }
                )
        index.append(entry)
    if problems:
        raise ReleaseError("license check failed:\n  " + "\n  ".join(problems))

    own = {"name": root["name"], "version": root["version"], "license": root.get("license")}
    if project_license:
        if not os.path.isfile(project_license):
            raise ReleaseError(f"the project's license file {project_license} is missing")
        own["files"] = [f"{root['name']}/LICENSE"]
        copies.append((project_license, own["files"][0]))
    index.append(own)
    if rust_doc:
        copyright_file = os.path.join(rust_doc, "COPYRIGHT-library.html")
        if not os.path.isfile(copyright_file):
            raise ReleaseError(f"the Rust standard library's {copyright_file} is missing")
        index.append(
            {
                "name": "rust-std",
                "version": None,
                "license": "MIT OR Apache-2.0 (see COPYRIGHT-library.html)",
                "files": ["rust-std/COPYRIGHT-library.html"],
            }
        )
        copies.append((copyright_file, "rust-std/COPYRIGHT-library.html"))

    os.makedirs(out_dir, exist_ok=True)
    for copy in copies:
        target = os.path.join(out_dir, copy[1])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if copy[0] is None:
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(copy[2])
        else:
            shutil.copyfile(copy[0], target)
    index.sort(key=lambda e: (e["name"], e["version"] or ""))
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as handle:
        json.dump({"packages": index}, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return index


# --- ELF: the minimum glibc ----------------------------------------------------------------


SHT_GNU_VERNEED = 0x6FFFFFFE


def min_glibc(data):
    """The highest GLIBC_x.y symbol version an ELF64 little-endian executable requires (its
    minimum glibc), from the .gnu.version_r section; None when it needs none."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ReleaseError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for index in range(shnum):
        at = shoff + index * shentsize
        kind, = struct.unpack_from("<I", data, at + 4)
        offset, size = struct.unpack_from("<QQ", data, at + 0x18)
        link, info = struct.unpack_from("<II", data, at + 0x28)
        sections.append((kind, offset, size, link, info))
    versions = []
    for kind, offset, size, link, count in sections:
        if kind != SHT_GNU_VERNEED:
            continue
        strtab = sections[link][1]

        def name_at(at):
            return data[strtab + at : data.index(b"\0", strtab + at)].decode()

        entry = offset
        for _ in range(count):
            _, aux_count, _, aux, next_entry = struct.unpack_from("<HHIII", data, entry)
            aux_at = entry + aux
            for _ in range(aux_count):
                _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, aux_at)
                match = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", name_at(name))
                if match:
                    versions.append(tuple(int(part) for part in match.group(1).split(".")))
                aux_at += next_aux
                if not next_aux:
                    break
            entry += next_entry
            if not next_entry:
                break
    if not versions:
        return None
    return ".".join(str(part) for part in max(versions))


# --- the archive ---------------------------------------------------------------------------


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def read_tree(root):
    """Every regular file under root as {relative posix path: bytes}."""
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as handle:
                files[relative] = handle.read()
    return files


def signature_kind(target):
    """What the archive's signature evidence is. Linux builds are never signed; the kinds for
    macOS (`developer_id`, `adhoc`) and Windows (`authenticode`, `unsigned`) are for when those
    targets are built and must then come from inspecting the signed files."""
    if "-linux-" in target:
        return "unsigned"
    raise ReleaseError(f"no signature evidence is implemented for {target}")


def build_manifest(version_info, target, revision, epoch, files):
    """manifest.json as a dict. `files` maps archive-relative paths (everything except
    manifest.json and SHA256SUMS) to bytes."""
    glibc = [min_glibc(files[name]) for name in EXECUTABLES]
    known = [tuple(int(p) for p in v.split(".")) for v in glibc if v]
    libc = {"kind": "glibc", "minVersion": ".".join(map(str, max(known))) if known else None}
    return {
        "schemaVersion": MANIFEST_SCHEMA_VERSION,
        "name": version_info["name"],
        "version": version_info["version"],
        "serviceVersion": version_info["service"]["version"],
        "target": target,
        "protocols": version_info["protocols"],
        "ipcVersion": version_info["ipcVersion"],
        "libc": libc,
        "source": {"revision": revision, "sourceDateEpoch": epoch},
        "executables": {
            "bridge": "browser-pilot",
            "cli": "bp",
            "conformance": "browser-pilot-conformance",
        },
        "files": [
            {
                "path": name,
                "size": len(files[name]),
                "sha256": sha256_hex(files[name]),
                "executable": name in EXECUTABLES,
            }
            for name in sorted(files)
        ],
        "signature": {"kind": signature_kind(target)},
    }


def sha256sums(files):
    return "".join(f"{sha256_hex(files[name])}  {name}\n" for name in sorted(files))


def write_tar_gz(path, top, files, epoch):
    """A reproducible tar.gz: sorted entries under `top/`, directories included, mtimes at
    `epoch`, owner root:root with no names, modes 0755 (directories, executables) or 0644, gzip
    header without file name and with the same mtime."""
    directories = {top}
    for name in files:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories.add(top + "/" + "/".join(parts[:depth]))
    entries = sorted([(d, None) for d in directories] + [(f"{top}/{n}", n) for n in files])
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry_path, name in entries:
            info = tarfile.TarInfo(entry_path)
            info.mtime = epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if name is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
            else:
                data = files[name]
                info.size = len(data)
                info.mode = 0o755 if name in EXECUTABLES else 0o644
                archive.addfile(info, io.BytesIO(data))
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=epoch, compresslevel=9) as gz:
            gz.write(buffer.getvalue())


def bundle(args):
    with open(args.version_json, encoding="utf-8") as handle:
        version_info = json.load(handle)
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    files = {}
    for name in EXECUTABLES:
        with open(os.path.join(args.bin_dir, name), "rb") as handle:
            files[name] = handle.read()
    with open(args.readme, "rb") as handle:
        files["README"] = handle.read()
    for name, data in read_tree(args.licenses).items():
        files[f"licenses/{name}"] = data
    manifest = build_manifest(version_info, args.target, args.revision, epoch, files)
    files["manifest.json"] = (json.dumps(manifest, indent=2) + "\n").encode()
    files["SHA256SUMS"] = sha256sums(files).encode()
    top = f"browser-pilot-{version_info['version']}-{args.target}"
    archive = os.path.join(args.out, f"{top}.tar.gz")
    write_tar_gz(archive, top, files, epoch)
    with open(archive, "rb") as handle:
        digest = sha256_hex(handle.read())
    with open(archive + ".sha256", "w", encoding="utf-8") as handle:
        handle.write(f"{digest}  {top}.tar.gz\n")


# --- the npm package tree ------------------------------------------------------------------


NPM_PLATFORMS = {
    "x86_64-unknown-linux-gnu": ("linux", "x64"),
    "aarch64-unknown-linux-gnu": ("linux", "arm64"),
}


def npm_tree(args):
    """packaging/npm plus native/<target>/ executables, licenses/ and the version, in out."""
    with open(args.version_json, encoding="utf-8") as handle:
        version_info = json.load(handle)
    if args.target not in NPM_PLATFORMS:
        raise ReleaseError(f"no npm platform mapping for {args.target}")
    platform, cpu = NPM_PLATFORMS[args.target]
    shutil.copytree(args.template, args.out)
    package_path = os.path.join(args.out, "package.json")
    with open(package_path, encoding="utf-8") as handle:
        package = json.load(handle)
    package["version"] = version_info["version"]
    package["os"] = [platform]
    package["cpu"] = [cpu]
    with open(package_path, "w", encoding="utf-8") as handle:
        json.dump(package, handle, indent=2)
        handle.write("\n")
    native = os.path.join(args.out, "native", args.target)
    os.makedirs(native)
    for name in EXECUTABLES:
        shutil.copyfile(os.path.join(args.bin_dir, name), os.path.join(native, name))
        os.chmod(os.path.join(native, name), 0o755)
    shutil.copytree(args.licenses, os.path.join(args.out, "licenses"))
    shutil.copyfile(
        os.path.join(args.licenses, "browser-pilot", "LICENSE"), os.path.join(args.out, "LICENSE")
    )
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    for directory, _, names in os.walk(args.out):
        for name in names:
            os.utime(os.path.join(directory, name), (epoch, epoch))


# --- command line --------------------------------------------------------------------------


def main(argv):
    parser = argparse.ArgumentParser(prog="release_tools.py")
    commands = parser.add_subparsers(dest="command", required=True)
    licenses = commands.add_parser("licenses")
    licenses.add_argument("--metadata", required=True)
    licenses.add_argument("--allowlist", required=True)
    licenses.add_argument("--project-license")
    licenses.add_argument("--rust-doc")
    licenses.add_argument("--out", required=True)
    archive = commands.add_parser("bundle")
    npm = commands.add_parser("npm")
    for sub in (archive, npm):
        sub.add_argument("--bin-dir", required=True)
        sub.add_argument("--version-json", required=True)
        sub.add_argument("--licenses", required=True)
        sub.add_argument("--target", required=True)
        sub.add_argument("--out", required=True)
    archive.add_argument("--readme", required=True)
    archive.add_argument("--revision", required=True)
    npm.add_argument("--template", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "licenses":
            with open(args.metadata, encoding="utf-8") as handle:
                metadata = json.load(handle)
            with open(args.allowlist, encoding="utf-8") as handle:
                allowlist = json.load(handle)
            collect_licenses(metadata, allowlist, args.out, args.project_license, args.rust_doc)
        elif args.command == "bundle":
            bundle(args)
        else:
            npm_tree(args)
    except ReleaseError as error:
        print(f"release_tools.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
