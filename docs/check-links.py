#!/usr/bin/env python3
"""Checks every link inside the built guide (docs/book): each relative link
points to a page that exists, and each #anchor to an id on that page.
Links that leave the guide (http:, https:, mailto:) are not followed: the
guide is read offline and CI reaches no other host. Exits 1 on a broken one.

    python3 docs/check-links.py docs/book
"""
import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and "name" in attrs:
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


def read(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def main(book):
    pages = {}
    for root, _, files in os.walk(book):
        for name in files:
            if name.endswith(".html"):
                path = os.path.normpath(os.path.join(root, name))
                pages[path] = read(path)
    broken = []
    for path, page in sorted(pages.items()):
        for link in page.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("//"):
                continue
            target = path
            if url.path:
                target = os.path.normpath(os.path.join(os.path.dirname(path), urllib.parse.unquote(url.path)))
                if not os.path.exists(target):
                    broken.append(f"{path}: {link}: no such file")
                    continue
            if url.fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else read(target).ids
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{path}: {link}: no such anchor")
    for b in broken:
        print(b)
    print(f"{len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/book"))
