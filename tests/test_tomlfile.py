"""read_toml: one-line errors for every way a user's TOML file can be unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinlab.errors import ConfigError, toml_path
from pinlab.tomlfile import MAX_DEPTH, parse_toml, read_toml


def _error(path: Path | str) -> str:
    with pytest.raises(ConfigError) as exc:
        read_toml(path, what="a scenario file")
    line = str(exc.value)
    assert "\n" not in line
    return line


def test_reads_a_table(tmp_path: Path) -> None:
    f = tmp_path / "ok.toml"
    f.write_text('a = 1\n[b]\nc = "x"\n', encoding="utf-8")
    assert read_toml(f) == {"a": 1, "b": {"c": "x"}}


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "bom.toml"
    f.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert read_toml(f) == {"a": 1}


@pytest.mark.parametrize(
    ("data", "found"),
    [
        ("a = 1\n".encode("utf-16"), "found UTF-16 text"),
        (b"a = \xff\xfe\x00\n", "found byte 0xff at offset 4"),
        (b"\x7fELF\x02\x01\x01\x00", "found a NUL byte at offset 7"),
    ],
)
def test_bytes_that_are_not_utf8_text(tmp_path: Path, data: bytes, found: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_bytes(data)
    assert found in _error(f)


def test_path_problems(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope.toml").endswith("expected a scenario file, found no such file")
    assert _error(tmp_path).endswith("found a directory")
    assert "NUL byte in the path" in _error(str(tmp_path / "a\x00b.toml"))
    assert "empty path" in _error("")


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text("a = 1\nb = = 2\n", encoding="utf-8")
    line = _error(f)
    assert line.startswith(f"{f}: line 2, column 5: expected valid TOML, found ")


def test_deep_nesting_is_refused_before_parsing() -> None:
    text = "a = " + "[" * 5000 + "]" * 5000
    with pytest.raises(ConfigError, match=f"nested at most {MAX_DEPTH} deep, found 5000"):
        parse_toml(text, "deep.toml")
    shallow = "a = " + "[" * 10 + "]" * 10
    assert parse_toml(shallow, "ok.toml")["a"]


def test_nesting_limit_is_exact_whether_or_not_the_text_is_scanned() -> None:
    at_limit = "a = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_toml(at_limit, "ok.toml")["a"]
    over = "a = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(ConfigError, match=f"found {MAX_DEPTH + 1}$"):
        parse_toml(over, "deep.toml")
    # more brackets than the limit, none of them deep: scanned, and accepted
    many = "".join(f"[t{i}]\nx = [[1], {{y = 2}}]\n" for i in range(MAX_DEPTH))
    assert len(parse_toml(many, "wide.toml")) == MAX_DEPTH


def test_brackets_inside_strings_and_comments_do_not_count() -> None:
    text = 'a = "' + "[" * 200 + '"\n# ' + "{" * 200 + "\nb = '''" + "[" * 200 + "'''\n"
    assert parse_toml(text, "s.toml")["a"].startswith("[")


def test_date_values_are_refused_with_their_key_path() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_toml('[[tenants]]\nname = "a"\nstart = 1979-05-27\n', "d.toml")
    assert str(exc.value) == (
        "d.toml: tenants[0].start: expected a number, string, boolean, array or table, "
        "found the TOML date/time 1979-05-27"
    )


def test_toml_path_quotes_keys_that_need_it() -> None:
    assert toml_path(("cgroups", "a/b", "dmem.max", 0)) == 'cgroups."a/b"."dmem.max"[0]'


def test_integers_outside_tomls_64_bit_range_are_refused() -> None:
    """toml.io v1.0.0: integers are 64-bit signed; a larger one must be an error (tomllib
    accepts it). 2^63-1 itself is fine."""
    assert parse_toml("seed = 9223372036854775807\n", "s.toml") == {"seed": 2**63 - 1}
    with pytest.raises(ConfigError) as exc:
        parse_toml('[cgroups."a/b"]\nx = [1, 18446744073709551616]\n', "s.toml")
    assert str(exc.value) == (
        's.toml: cgroups."a/b".x[1]: expected an integer within TOML\'s 64-bit range '
        "(-2^63 to 2^63-1), found 18446744073709551616"
    )
    with pytest.raises(ConfigError, match=r"^s\.toml: x: .*found an integer of 40 digits$"):
        parse_toml("x = " + "9" * 40 + "\n", "s.toml")


def test_an_integer_too_long_to_convert_is_one_line() -> None:
    """Python refuses int() of more than 4300 digits; tomllib lets that ValueError out."""
    with pytest.raises(ConfigError) as exc:
        parse_toml("x = " + "9" * 5000 + "\n", "s.toml")
    line = str(exc.value)
    assert line.startswith("s.toml: expected valid TOML, found a number too long to read")
    assert "\n" not in line


def test_toml_path_escapes_control_characters() -> None:
    assert toml_path(("users", "a\nb", 2)) == 'users."a\\nb"[2]'
