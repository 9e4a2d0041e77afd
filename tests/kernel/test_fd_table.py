"""The fd table (``struct files_struct``): lowest free number first, ``-EBADF`` for a number
that is not open, close-on-exec bits, and ``exit_files`` closing highest first."""

from __future__ import annotations

from pinlab.kernel.file import O_CLOEXEC, FdTable, File


def test_install_takes_the_lowest_free_number_from_3() -> None:
    table = FdTable()
    files = [File("test", i) for i in range(4)]
    fds = [table.install(f) for f in files]
    assert fds == [3, 4, 5, 6]
    assert table.close(4) and table.close(3)
    assert table.install(File("test", "a")) == 3
    assert table.install(File("test", "b")) == 4
    assert table.install(File("test", "c")) == 7
    assert len(table) == 5
    assert list(table) == [3, 4, 5, 6, 7]


def test_numbers_that_are_not_open() -> None:
    table = FdTable()
    fd = table.install(File("test", None))
    for bad in (-1, 0, 2, fd + 1, 1 << 40):
        assert table.lookup(bad) is None
        assert bad not in table
        assert not table.close(bad)  # the syscall's -EBADF
    assert "3" not in table
    assert table.close(fd) and not table.close(fd)
    assert table.lookup(fd) is None and len(table) == 0


def test_close_drops_the_table_reference() -> None:
    log: list[str] = []
    table = FdTable()
    file = File("test", "x", release=lambda f: log.append(str(f.private_data)))
    fd = table.install(file)
    other = table.install(file.get())
    assert table.lookup(fd) is file and table.lookup(other) is file
    table.close(fd)
    assert log == [] and file.f_count == 1
    table.close(other)
    assert log == ["x"]


def test_close_on_exec_follows_the_number() -> None:
    table = FdTable()
    a = table.install(File("test", "a"), O_CLOEXEC)
    b = table.install(File("test", "b"))
    assert table.close_on_exec(a) and not table.close_on_exec(b)
    table.close(a)
    assert not table.close_on_exec(a)
    assert table.install(File("test", "c")) == a and not table.close_on_exec(a)


def test_iteration_is_a_snapshot_and_close_all_goes_highest_first() -> None:
    log: list[str] = []
    table = FdTable()
    for name in "abcd":
        table.install(File("test", name, release=lambda f: log.append(str(f.private_data))))
    table.close(4)  # "b"
    assert log == ["b"]
    for fd in table:  # closing while iterating is fine
        if fd == 5:
            table.close(fd)
    assert list(table) == [3, 6] and log == ["b", "c"]
    table.close_all()
    assert log == ["b", "c", "d", "a"]
    assert len(table) == 0 and list(table) == []
