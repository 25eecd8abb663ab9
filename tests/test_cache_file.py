"""fxrl._cache_file: the small files fxrl keeps in inductor's cache are written whole or
not at all, and a failed write never raises."""

import os

from fxrl._cache_file import write_cache_file


def test_the_file_is_written_whole_in_a_folder_made_for_it(tmp_path):
    path = tmp_path / "index" / "key"
    write_cache_file(str(path), "first")
    write_cache_file(str(path), "second")
    assert path.read_text() == "second"
    assert os.listdir(path.parent) == ["key"]  # no temporary file left


def test_a_write_that_fails_raises_nothing_and_leaves_nothing(tmp_path):
    folder = tmp_path / "read-only"
    folder.mkdir()
    (folder / "key").mkdir()  # a directory where the file should go: os.replace fails
    write_cache_file(str(folder / "key"), "text")
    assert sorted(os.listdir(folder)) == ["key"] and (folder / "key").is_dir()
