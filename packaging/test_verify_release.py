"""Unit tests of scripts/verify-release (run with the other packaging tests:
`python3 -m unittest discover -s packaging -t packaging`).

Each check is run on a small tree or archive made in a temporary directory: world-writable
entries and symlinked directories in an unpacked tree, a name listed twice in SHA256SUMS or
manifest.json, a decompression bomb refused before anything is written, and an archive checksum
given on the command line.
"""

import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import tarfile
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "verify-release")


def load_verify_release():
    loader = importlib.machinery.SourceFileLoader("verify_release", SCRIPT)
    spec = importlib.util.spec_from_loader("verify_release", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


verify = load_verify_release()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_tree(root, files):
    for name, data in files.items():
        path = os.path.join(root, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for directory in (root, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
            os.chmod(directory, 0o755)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o644)
    with open(os.path.join(root, "SHA256SUMS"), "w", encoding="utf-8") as handle:
        for name, data in sorted(files.items()):
            handle.write(f"{sha256(data)}  {name}\n")
    os.chmod(os.path.join(root, "SHA256SUMS"), 0o644)


def write_archive(path, files):
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in files.items():
            member = tarfile.TarInfo(f"top/{name}")
            member.size = len(data)
            member.mode = 0o644
            bundle.addfile(member, io.BytesIO(data))


class UnpackedTree(unittest.TestCase):
    FILES = {"README": b"readme", "licenses/a/LICENSE": b"a"}

    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.scratch.name, "release")
        os.mkdir(self.root, 0o755)
        write_tree(self.root, self.FILES)

    def tearDown(self):
        self.scratch.cleanup()

    def refused(self, why):
        with self.assertRaises(verify.Failed) as raised:
            verify.check_sums(self.root)
        self.assertIn(why, str(raised.exception))

    def test_a_plain_tree_passes(self):
        self.assertEqual(set(verify.check_sums(self.root)), set(self.FILES))

    def test_a_world_writable_file_is_refused(self):
        os.chmod(os.path.join(self.root, "README"), 0o666)
        self.refused("world-writable")

    def test_a_world_writable_directory_is_refused(self):
        os.chmod(os.path.join(self.root, "licenses", "a"), 0o777)
        self.refused("world-writable")

    def test_a_world_writable_top_directory_is_refused(self):
        os.chmod(self.root, 0o777)
        self.refused("world-writable")

    def test_a_symlinked_directory_is_refused(self):
        outside = os.path.join(self.scratch.name, "outside")
        os.mkdir(outside)
        os.symlink(outside, os.path.join(self.root, "licenses", "linked"))
        self.refused("symlink")

    def test_a_name_listed_twice_in_sha256sums_is_refused(self):
        with open(os.path.join(self.root, "SHA256SUMS"), "a", encoding="utf-8") as handle:
            handle.write(f"{sha256(b'readme')}  README\n")
        self.refused("twice")


class Manifest(unittest.TestCase):
    def test_a_file_listed_twice_is_refused(self):
        with tempfile.TemporaryDirectory() as root:
            entry = {"path": "README", "size": 6, "sha256": sha256(b"readme")}
            manifest = {
                "name": "browser-pilot",
                "version": "0.1.0",
                "target": "x86_64-unknown-linux-gnu",
                "protocols": ["1.0"],
                "libc": {},
                "source": {},
                "files": [entry, dict(entry)],
                "signature": {"kind": "unsigned"},
            }
            with open(os.path.join(root, "manifest.json"), "w", encoding="utf-8") as handle:
                json.dump(manifest, handle)
            with self.assertRaises(verify.Failed) as raised:
                verify.check_manifest(root, {"README": entry["sha256"], "manifest.json": "x"})
            self.assertIn("README twice", str(raised.exception))


class Archive(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.archive = os.path.join(self.scratch.name, "release.tar.gz")
        self.destination = os.path.join(self.scratch.name, "unpacked")

    def tearDown(self):
        self.scratch.cleanup()

    def test_a_bomb_is_refused_before_anything_is_written(self):
        write_archive(self.archive, {"a": b"\0" * 4096, "b": b"\0" * 4096})
        limit = verify.MAX_UNPACKED_BYTES
        verify.MAX_UNPACKED_BYTES = 6000
        try:
            with self.assertRaises(verify.Failed) as raised:
                verify.unpack(self.archive, self.destination)
        finally:
            verify.MAX_UNPACKED_BYTES = limit
        self.assertIn("bomb", str(raised.exception))
        self.assertEqual(os.listdir(self.scratch.name), ["release.tar.gz"])

    def test_too_many_entries_are_refused(self):
        write_archive(self.archive, {f"f{i}": b"x" for i in range(5)})
        limit = verify.MAX_ENTRIES
        verify.MAX_ENTRIES = 3
        try:
            with self.assertRaises(verify.Failed) as raised:
                verify.unpack(self.archive, self.destination)
        finally:
            verify.MAX_ENTRIES = limit
        self.assertIn("entries", str(raised.exception))
        self.assertFalse(os.path.exists(self.destination))

    def test_an_archive_within_the_bounds_unpacks(self):
        write_archive(self.archive, {"README": b"readme"})
        verify.unpack(self.archive, self.destination)
        with open(os.path.join(self.destination, "README"), "rb") as handle:
            self.assertEqual(handle.read(), b"readme")

    def test_a_checksum_given_on_the_command_line_is_checked(self):
        write_archive(self.archive, {"README": b"readme"})
        with open(self.archive, "rb") as handle:
            digest = sha256(handle.read())
        # No adjacent .sha256: the given one is enough, in either case.
        verify.check_archive_checksum(self.archive, digest)
        verify.check_archive_checksum(self.archive, digest.upper())
        with self.assertRaises(verify.Failed) as raised:
            verify.check_archive_checksum(self.archive, "0" * 64)
        self.assertIn("mismatch", str(raised.exception))
        with self.assertRaises(verify.Failed):
            verify.check_archive_checksum(self.archive, "not-hex")
        with self.assertRaises(verify.Failed) as raised:
            verify.check_archive_checksum(self.archive)
        self.assertIn("no adjacent checksum file", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
