"""Unit tests of packaging/release_tools.py: `python3 -m unittest discover -s packaging`.

The license collector runs on fake `cargo metadata` JSON over crate directories made in a
temporary directory, so the failure cases (a crate without license text, a license outside the
allow-list) are shown without touching the real dependency graph.
"""

import gzip
import io
import json
import os
import shutil
import tarfile
import tempfile
import unittest

import release_tools as tools

ALLOWLIST = {"licenses": ["MIT", "Apache-2.0", "ISC"], "exceptions": ["LLVM-exception"]}


class FakeWorkspace:
    """A fake metadata graph: root -> each named crate; crates are (name, license, files,
    kind) where kind is None (normal), "dev" or "build"."""

    def __init__(self, root_dir, crates):
        self.root_dir = root_dir
        packages = [self.package("app", "MIT", ["LICENSE"])]
        deps = []
        for name, license_expression, files, kind in crates:
            packages.append(self.package(name, license_expression, files))
            deps.append({"pkg": f"{name} 1.0.0", "dep_kinds": [{"kind": kind, "target": None}]})
        self.metadata = {
            "packages": packages,
            "resolve": {
                "root": "app 1.0.0",
                "nodes": [{"id": "app 1.0.0", "deps": deps}]
                + [{"id": f"{c[0]} 1.0.0", "deps": []} for c in crates],
            },
        }

    def package(self, name, license_expression, files):
        crate_dir = os.path.join(self.root_dir, f"{name}-1.0.0")
        os.makedirs(crate_dir)
        with open(os.path.join(crate_dir, "Cargo.toml"), "w") as handle:
            handle.write(f'[package]\nname = "{name}"\n')
        for file_name in files:
            with open(os.path.join(crate_dir, file_name), "w") as handle:
                handle.write(f"license text of {name}\n")
        return {
            "id": f"{name} 1.0.0",
            "name": name,
            "version": "1.0.0",
            "license": license_expression,
            "license_file": None,
            "manifest_path": os.path.join(crate_dir, "Cargo.toml"),
        }


class LicenseCollector(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def collect(self, crates):
        fake = FakeWorkspace(os.path.join(self.dir, "registry"), crates)
        return tools.collect_licenses(fake.metadata, ALLOWLIST, self.out)

    def test_a_crate_without_license_text_fails_the_build(self):
        with self.assertRaises(tools.ReleaseError) as failure:
            self.collect([("good", "MIT", ["LICENSE-MIT"], None), ("bare", "MIT", [], None)])
        self.assertIn("bare 1.0.0: no license text", str(failure.exception))
        self.assertNotIn("good", str(failure.exception))
        self.assertFalse(os.path.exists(self.out), "nothing is written when the check fails")

    def test_a_license_outside_the_allow_list_fails_the_build(self):
        with self.assertRaises(tools.ReleaseError) as failure:
            self.collect([("copyleft", "GPL-3.0-only", ["COPYING"], None)])
        self.assertIn("copyleft 1.0.0: license 'GPL-3.0-only'", str(failure.exception))

    def test_a_crate_without_a_license_expression_fails_the_build(self):
        with self.assertRaises(tools.ReleaseError) as failure:
            self.collect([("unstated", None, ["LICENSE"], None)])
        self.assertIn("unstated 1.0.0: no SPDX license expression", str(failure.exception))

    def test_every_problem_is_named_at_once(self):
        with self.assertRaises(tools.ReleaseError) as failure:
            self.collect([("bare", "MIT", [], None), ("copyleft", "GPL-2.0", ["LICENSE"], None)])
        self.assertIn("bare 1.0.0", str(failure.exception))
        self.assertIn("copyleft 1.0.0", str(failure.exception))

    def test_dev_and_build_dependencies_are_not_shipped(self):
        index = self.collect(
            [
                ("shipped", "MIT OR Apache-2.0", ["LICENSE-MIT", "LICENSE-APACHE"], None),
                ("bench-only", "GPL-3.0", [], "dev"),
                ("codegen", None, [], "build"),
            ]
        )
        names = [entry["name"] for entry in index]
        self.assertEqual(names, ["app", "shipped"], "the project itself and its shipped crate")
        shipped_dir = os.path.join(self.out, "shipped-1.0.0")
        self.assertEqual(sorted(os.listdir(shipped_dir)), ["LICENSE-APACHE", "LICENSE-MIT"])
        with open(os.path.join(self.out, "index.json")) as handle:
            listed = [entry["name"] for entry in json.load(handle)["packages"]]
        self.assertEqual(listed, ["app", "shipped"])

    def test_the_bundled_notice_is_taken_from_the_source_comment(self):
        fake = FakeWorkspace(os.path.join(self.dir, "registry"), [("sys", "MIT", ["LICENSE"], None)])
        crate_dir = os.path.join(self.dir, "registry", "sys-1.0.0")
        with open(os.path.join(crate_dir, "lib.h"), "w") as handle:
            handle.write("/*\n** Dedicated to the public domain.\n**\n****\n** API notes\n*/\nint x;\n")
        allowlist = dict(ALLOWLIST)
        allowlist["bundled"] = {
            "sys": {"name": "clib", "file": "lib.h", "license": "public domain", "must_contain": "public domain"}
        }
        tools.collect_licenses(fake.metadata, allowlist, self.out)
        with open(os.path.join(self.out, "clib", "NOTICE")) as handle:
            self.assertEqual(handle.read(), "Dedicated to the public domain.\n")

    def test_a_missing_bundled_notice_fails(self):
        fake = FakeWorkspace(os.path.join(self.dir, "registry"), [("sys", "MIT", ["LICENSE"], None)])
        allowlist = dict(ALLOWLIST)
        allowlist["bundled"] = {"sys": {"name": "clib", "file": "gone.h", "license": "x", "must_contain": ""}}
        with self.assertRaises(tools.ReleaseError):
            tools.collect_licenses(fake.metadata, allowlist, self.out)


class SpdxExpressions(unittest.TestCase):
    def check(self, expression, expect):
        self.assertEqual(
            tools.spdx_allowed(expression, set(ALLOWLIST["licenses"]), {"LLVM-exception"}),
            expect,
            expression,
        )

    def test_expressions(self):
        self.check("MIT", True)
        self.check("MIT OR GPL-3.0", True)
        self.check("GPL-3.0 OR MIT", True)
        self.check("MIT AND GPL-3.0", False)
        self.check("Apache-2.0 AND ISC", True)
        self.check("(MIT OR Apache-2.0) AND ISC", True)
        self.check("(MIT OR Apache-2.0) AND GPL-2.0", False)
        self.check("MIT/Apache-2.0", True)
        self.check("Apache-2.0 WITH LLVM-exception", True)
        self.check("Apache-2.0 WITH Classpath-exception-2.0", False)
        self.check("GPL-3.0", False)
        self.check("MIT OR", False)
        self.check("(MIT", False)
        self.check("", False)


class Archive(unittest.TestCase):
    FILES = {
        "browser-pilot": b"\x7fELF-not-really",
        "licenses/b/LICENSE": b"b",
        "licenses/a/LICENSE": b"a",
        "README": b"readme",
    }

    def write(self, path):
        tools.write_tar_gz(path, "top", self.FILES, 1700000000)
        with open(path, "rb") as handle:
            return handle.read()

    def test_the_archive_is_byte_identical_and_normalized(self):
        with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
            one = self.write(os.path.join(first, "a.tar.gz"))
            two = self.write(os.path.join(second, "b.tar.gz"))
        self.assertEqual(one, two)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(one))) as archive:
            members = archive.getmembers()
        names = [m.name for m in members]
        self.assertEqual(names, sorted(names))
        self.assertIn("top/licenses", names)
        for member in members:
            self.assertEqual((member.uid, member.gid, member.uname, member.gname), (0, 0, "", ""))
            self.assertEqual(member.mtime, 1700000000)
        modes = {m.name: m.mode for m in members}
        self.assertEqual(modes["top/browser-pilot"], 0o755)
        self.assertEqual(modes["top/README"], 0o644)

    def test_the_manifest_lists_every_file_and_the_signature_evidence(self):
        with open("/bin/sh", "rb") as handle:
            elf = handle.read()
        files = {name: elf for name in tools.EXECUTABLES}
        files["README"] = b"hello"
        manifest = tools.build_manifest(
            {"name": "browser-pilot", "version": "1.2.3", "service": {"version": "1.2.3"},
             "protocols": [{"major": 1, "minor": 1}], "ipcVersion": 1},
            "x86_64-unknown-linux-gnu", "abc", 5, files,
        )
        self.assertEqual([f["path"] for f in manifest["files"]], sorted(files))
        readme = [f for f in manifest["files"] if f["path"] == "README"][0]
        self.assertEqual(readme["size"], 5)
        self.assertEqual(readme["sha256"], tools.sha256_hex(b"hello"))
        self.assertEqual(manifest["signature"], {"kind": "unsigned"})
        self.assertEqual(manifest["libc"]["minVersion"], tools.min_glibc(elf))
        with self.assertRaises(tools.ReleaseError):
            tools.signature_kind("aarch64-apple-darwin")


SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "docs", "release-manifest.schema.json")
JSON_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool, "null": type(None)}


def schema_errors(value, schema, at="$"):
    """The subset of JSON Schema the manifest schema uses, enough to hold the two together."""
    errors = []
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(isinstance(value, JSON_TYPES[n]) and not (n == "integer" and isinstance(value, bool)) for n in names):
            return [f"{at}: {value!r} is not {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{at}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: {value!r} not in {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema:
        import re

        if not re.search(schema["pattern"], value):
            errors.append(f"{at}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{at}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{at}: missing {key}")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                errors.extend(schema_errors(item, properties[key], f"{at}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{at}: unexpected {key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{at}: fewer than {schema['minItems']} items")
        for index, item in enumerate(value):
            errors.extend(schema_errors(item, schema.get("items", {}), f"{at}[{index}]"))
    return errors


class ManifestSchema(unittest.TestCase):
    def test_the_built_manifest_follows_the_documented_schema(self):
        with open(SCHEMA_PATH) as handle:
            schema = json.load(handle)
        with open("/bin/sh", "rb") as handle:
            elf = handle.read()
        files = {name: elf for name in tools.EXECUTABLES}
        files["licenses/index.json"] = b"{}"
        manifest = tools.build_manifest(
            {"name": "browser-pilot", "version": "0.1.0", "service": {"version": "0.1.0"},
             "protocols": [{"major": 1, "minor": 0}, {"major": 1, "minor": 1}], "ipcVersion": 1},
            "x86_64-unknown-linux-gnu", "0123abc", 1700000000, files,
        )
        self.assertEqual(schema_errors(manifest, schema), [])
        manifest["signature"] = {"kind": "trusted"}
        del manifest["libc"]
        self.assertEqual(len(schema_errors(manifest, schema)), 2, "the checker itself can fail")


class Glibc(unittest.TestCase):
    def test_the_minimum_glibc_of_a_system_executable(self):
        with open("/bin/sh", "rb") as handle:
            version = tools.min_glibc(handle.read())
        self.assertRegex(version, r"^2\.\d+(\.\d+)?$")

    def test_a_non_elf_file_is_refused(self):
        with self.assertRaises(tools.ReleaseError):
            tools.min_glibc(b"#!/bin/sh\n")


if __name__ == "__main__":
    unittest.main()
