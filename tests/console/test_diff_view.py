"""The kept workspace's diff on the run page, pure: git's diff parsed into files of marked
lines, binary patches left out, each line's text split into pygments' tokens of its file's
language with their control characters escaped, and drawn as text (never markup); the colours
in static/diff.css are pygments' own."""

from __future__ import annotations

from pathlib import Path

from overnight.console import diff_view
from overnight.console.diff_view import highlight, parse
from overnight.console.render import fragment

DIFF = """\
diff --git a/app.py b/app.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/app.py
@@ -0,0 +1,2 @@
+def greet():  # <b>not bold</b>
+    return "\x1b[2J</pre><script>alert(1)</script>"
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..2222222
GIT binary patch
literal 5
McmZQzfB*mh00961

literal 0
HcmV?d00001

diff --git a/notes.txt b/notes.txt
index 3333333..4444444 100644
--- a/notes.txt
+++ b/notes.txt
@@ -1,2 +1,2 @@
 kept
-old line
+new line
\\ No newline at end of file
"""


def test_files_and_their_lines_are_marked_added_removed_and_context() -> None:
    shown = parse(DIFF)
    assert [(f.path, f.change, f.added, f.removed) for f in shown.files] == [
        ("app.py", "added", 2, 0),
        ("logo.png", "binary", 0, 0),
        ("notes.txt", "changed", 1, 1),
    ]
    notes = shown.files[2]
    kinds = [line.kind for line in notes.lines]
    assert kinds == ["meta", "meta", "meta", "hunk", "ctx", "del", "add", "note"]
    assert not shown.truncated


def test_a_binary_patch_is_named_not_shown() -> None:
    binary = parse(DIFF).files[1]
    texts = [line.text for line in binary.lines]
    assert "binary file: its bytes are not shown" in texts
    assert not any("McmZQz" in text or "literal" in text for text in texts)


def test_lines_past_the_cap_are_left_out_and_said() -> None:
    shown = parse(DIFF, max_lines=5)
    assert shown.truncated
    assert sum(len(f.lines) for f in shown.files) == 5


def test_lines_are_tokens_of_their_language_with_pygments_classes_and_controls_escaped() -> None:
    app = highlight(parse(DIFF)).files[0]
    body = app.lines[-1]
    assert body.tokens[0] == diff_view.Token("diff-mark", "+")
    keyword = next(t for t in app.lines[-2].tokens if t.text == "def")
    assert keyword.css == "tok-k"  # pygments' Keyword class, prefixed
    text = "".join(t.text for t in body.tokens)
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert any(t.css.startswith("tok-s") for t in body.tokens)  # the string


def test_the_drawn_diff_holds_the_agents_markup_as_text() -> None:
    shown = highlight(parse(DIFF))
    html = fragment(
        "_diff.html",
        {
            "run_id": "r1",
            "status": None,
            "kept": [_kept()],
            "step": _kept(),
            "diff": shown,
            "diff_problem": None,
        },
    )
    assert "<script>" not in html and "</pre><script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert '<span class="tok-k">def</span>' in html


def test_the_static_style_sheet_is_pygments_own_colours() -> None:
    sheet = Path(diff_view.__file__).parent / "static" / "diff.css"
    rules = [line for line in sheet.read_text().splitlines() if not line.startswith("/*")]
    assert rules == diff_view.style_css().splitlines()


def _kept() -> object:
    from datetime import UTC, datetime

    from overnight.core.workspace_spec import KeptWorkspace

    return KeptWorkspace(
        number=1,
        outcome="pushed",
        at=datetime(2026, 12, 6, tzinfo=UTC),
        ref="refs/overnight/r1/1",
        commit="a" * 40,
    )
