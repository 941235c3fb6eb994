"""Paths under an engine root: what is rejected (before anything runs), and how selections list."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.errors import StorageError
from engine.storage.paths import (
    glob_regex,
    is_hidden,
    list_selection,
    parse_root,
    resolve_under_root,
)


def touch(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------- resolution and safety


def test_a_leading_slash_means_the_root(tmp_path: Path) -> None:
    assert resolve_under_root(tmp_path, "/donuts.json") == tmp_path / "donuts.json"
    assert resolve_under_root(tmp_path, "donuts.json") == tmp_path / "donuts.json"
    assert resolve_under_root(tmp_path, "/") == tmp_path


def test_dot_dot_inside_the_root_is_fine(tmp_path: Path) -> None:
    assert resolve_under_root(tmp_path, "a/b/../c.json") == tmp_path / "a" / "c.json"


@pytest.mark.parametrize("path", ["../x", "/../x", "a/../../x", "..", "a/b/../../../etc/passwd"])
def test_dot_dot_escaping_the_root_is_rejected(tmp_path: Path, path: str) -> None:
    with pytest.raises(StorageError) as caught:
        resolve_under_root(tmp_path, path, engine_name="fs1", role="target path")
    assert str(caught.value) == (
        f"target path '{path}' escapes the root of storage engine 'fs1' ({tmp_path})"
    )


def test_file_url_inside_the_root_is_accepted(tmp_path: Path) -> None:
    assert resolve_under_root(tmp_path, f"file://{tmp_path}/a.json") == tmp_path / "a.json"


def test_absolute_file_url_outside_the_root_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="escapes the root of storage engine 'fs1'"):
        resolve_under_root(tmp_path, "file:///etc/passwd", engine_name="fs1")


def test_an_absolute_path_cannot_leave_the_root(tmp_path: Path) -> None:
    # "/etc/passwd" is read as <root>/etc/passwd: absolute paths name places under the root.
    assert resolve_under_root(tmp_path, "/etc/passwd") == tmp_path / "etc" / "passwd"


@pytest.mark.parametrize(
    "url", ["s3://bucket/x.json", "http://example.com/x", "hdfs:///data", "HTTPS://x/y"]
)
def test_other_url_schemes_are_rejected(tmp_path: Path, url: str) -> None:
    scheme = url.split(":")[0].lower()
    with pytest.raises(StorageError, match=f"uses the URL scheme '{scheme}'"):
        resolve_under_root(tmp_path, url, engine_name="fs1")


def test_file_url_naming_a_remote_host_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="names the host 'elsewhere'"):
        resolve_under_root(tmp_path, "file://elsewhere/x.json")


def test_nul_character_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="NUL"):
        resolve_under_root(tmp_path, "a\x00.json")


def test_symlink_leaving_the_root_is_rejected(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    touch(outside / "secret.json")
    root.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(StorageError, match="through a symbolic link"):
        resolve_under_root(root, "/link/secret.json", engine_name="fs1")
    with pytest.raises(StorageError, match="through a symbolic link"):
        resolve_under_root(root, "/link", engine_name="fs1")


def test_symlink_inside_the_root_is_kept(tmp_path: Path) -> None:
    touch(tmp_path / "real" / "a.json")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert resolve_under_root(tmp_path, "/alias/a.json") == tmp_path / "alias" / "a.json"


def test_a_root_that_is_itself_a_symlink_works(tmp_path: Path) -> None:
    touch(tmp_path / "real" / "a.json")
    (tmp_path / "root").symlink_to(tmp_path / "real")
    files = list_selection(tmp_path / "root", "/")
    assert [f.path.name for f in files] == ["a.json"]


def test_parse_root_forms(tmp_path: Path) -> None:
    assert parse_root("file:///") == Path("/")
    assert parse_root(f"file://{tmp_path}") == tmp_path
    assert parse_root(str(tmp_path)) == tmp_path
    with pytest.raises(StorageError, match="uses the URL scheme 's3'"):
        parse_root("s3://bucket", engine_name="x")


# ---------------------------------------------------------------- listing


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in [
        "logs/2024/02/b.json",
        "logs/2024/01/a.json",
        "logs/2023/12/z.json",
        "logs/top.json",
        "logs/notes.txt",
        "logs/.hidden.json",
        "logs/_SUCCESS",
        "logs/_tmp/x.json",
        "logs/.staging/y.json",
        "logs/_p=1/c.json",
        "logs/2024/01/d.json._COPYING_",
    ]:
        touch(tmp_path / rel)
    return tmp_path


def rels(files: list) -> list[str]:
    return ["/".join((*f.dirs, f.path.name)) for f in files]


def test_directory_lists_recursively_sorted_skipping_hidden(tree: Path) -> None:
    files = list_selection(tree, "/logs")
    assert rels(files) == [
        "2023/12/z.json",
        "2024/01/a.json",
        "2024/02/b.json",
        "_p=1/c.json",
        "notes.txt",
        "top.json",
    ]
    assert files[0].dirs == ("2023", "12")
    assert files[0].size == 2
    assert files[0].path == tree / "logs" / "2023" / "12" / "z.json"


def test_a_file_names_itself_even_when_hidden(tree: Path) -> None:
    [hidden] = list_selection(tree, "/logs/.hidden.json")
    assert hidden.dirs == () and hidden.path.name == ".hidden.json"


def test_glob_in_one_directory(tree: Path) -> None:
    assert rels(list_selection(tree, "/logs/*.json")) == ["top.json"]


def test_glob_recursive(tree: Path) -> None:
    assert rels(list_selection(tree, "/logs/**/*.json")) == [
        "2023/12/z.json",
        "2024/01/a.json",
        "2024/02/b.json",
        "_p=1/c.json",
        "top.json",
    ]


def test_glob_matching_directories_takes_their_files(tree: Path) -> None:
    files = list_selection(tree, "/logs/2024/*")
    assert rels(files) == ["01/a.json", "02/b.json"]
    assert files[0].dirs == ("01",)


def test_glob_in_a_middle_component(tree: Path) -> None:
    assert rels(list_selection(tree, "/logs/202?/01/*.json")) == ["2024/01/a.json"]


def test_glob_regex_character_classes() -> None:
    regex = glob_regex("[!a]*.json")
    assert regex.fullmatch("b.json") and not regex.fullmatch("a.json")


def test_hidden_rule_matches_spark() -> None:
    assert is_hidden(".x") and is_hidden("_x") and not is_hidden("_x=1") and not is_hidden("x")


def test_empty_directory_is_an_empty_selection(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    touch(tmp_path / "only_hidden" / ".crc")
    assert list_selection(tmp_path, "/empty") == []
    assert list_selection(tmp_path, "/only_hidden") == []


def test_missing_path_names_it_and_the_root(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as caught:
        list_selection(tmp_path, "/nope.json", engine_name="fs1")
    assert str(caught.value) == (
        f"selection path '/nope.json' does not exist in storage engine 'fs1' ({tmp_path})"
    )


def test_glob_matching_nothing_is_an_error(tree: Path) -> None:
    with pytest.raises(StorageError, match=r"'/logs/\*\.csv' matches no files"):
        list_selection(tree, "/logs/*.csv", engine_name="fs1")
    with pytest.raises(StorageError, match="matches no files"):
        list_selection(tree, "/nothere/*.json", engine_name="fs1")


def test_listing_rejects_a_symlink_pointing_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    touch(root / "data" / "a.json")
    touch(outside / "secret.json")
    (root / "data" / "escape").symlink_to(outside)
    with pytest.raises(StorageError, match="symbolic link that leaves the storage root"):
        list_selection(root, "/data")
    with pytest.raises(StorageError, match="symbolic link that leaves the storage root"):
        list_selection(root, "/data/**/*.json")


def test_listing_follows_inner_symlinks_and_survives_cycles(tmp_path: Path) -> None:
    touch(tmp_path / "data" / "real" / "a.json")
    (tmp_path / "data" / "real" / "loop").symlink_to(tmp_path / "data")
    (tmp_path / "data" / "alias.json").symlink_to(tmp_path / "data" / "real" / "a.json")
    files = list_selection(tmp_path, "/data")
    assert rels(files) == ["alias.json", "real/a.json"]
    alias = files[0]
    assert alias.real_path == Path(os.path.realpath(tmp_path / "data" / "real" / "a.json"))


def test_broken_symlinks_are_skipped_in_listings(tmp_path: Path) -> None:
    touch(tmp_path / "d" / "a.json")
    (tmp_path / "d" / "gone.json").symlink_to(tmp_path / "d" / "missing.json")
    assert rels(list_selection(tmp_path, "/d")) == ["a.json"]
    with pytest.raises(StorageError, match="broken symbolic link"):
        list_selection(tmp_path, "/d/gone.json")


def test_special_files_are_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(StorageError, match="not a regular file"):
        list_selection(tmp_path, "/pipe")
    assert list_selection(tmp_path, "/") == []
