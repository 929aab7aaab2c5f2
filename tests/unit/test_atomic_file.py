"""storage.atomicfile.AtomicFile (storage.files.AtomicFile too), the one
way xs replaces a file: the new content appears whole or not at all, no
temporary file is left either way, and the mode is exact, private, or
the replaced file's."""
import os
import stat

import pytest

from storage.atomicfile import AtomicFile, write_atomically


def test_the_new_content_replaces_the_file_whole_and_private(tmp_path):
    p = tmp_path / "f"
    p.write_text("old")
    os.chmod(p, 0o644)
    assert write_atomically(str(p), lambda f: f.write(b"new") and "done") == "done"
    assert p.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["f"]


def test_a_failure_inside_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "f"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with AtomicFile(str(p)) as f:
            f.write(b"half")
            raise RuntimeError("disk full")
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


def test_inherit_keeps_the_replaced_files_mode_or_takes_the_umask(tmp_path):
    p = tmp_path / "f"
    p.write_text("old")
    os.chmod(p, 0o640)
    with AtomicFile(str(p), mode="inherit", text=True) as f:
        f.write("text\n")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640 and p.read_text() == "text\n"
    q = tmp_path / "new"
    old = os.umask(0o027)
    try:
        with AtomicFile(str(q), mode="inherit", text=True) as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(q).st_mode) == 0o640


def test_through_a_directory_descriptor(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        n = iter(range(10))

        def make_temp():
            name = "t%d" % next(n)
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd), name
        write_atomically("m", lambda f: f.write(b"{}"), dir_fd=fd, make_temp=make_temp)
    finally:
        os.close(fd)
    assert (tmp_path / "m").read_bytes() == b"{}" and os.listdir(tmp_path) == ["m"]
