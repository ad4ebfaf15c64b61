"""Shared by the tests of pyro_ar.datasets: ``data_folder(name, files)``, the real data set's
folder below ``default_data_dir()`` (fails the test if absent where the data are expected, as
in CI; skips it otherwise: :func:`tests.helpers.require_data`), and ``write_gcide(root,
articles)``, a small GCIDE dictd database."""

import gzip
from pathlib import Path

import pytest

from pyro_ar.datasets import data_search_path
from tests.helpers import require_data as data_folder

__all__ = ["data_folder", "fetched_data_folder", "ARTICLES", "b64", "write_gcide"]


def fetched_data_folder(name, *files):
    """The folder of a data set the project's data root does not hold and a user fetches
    (WordNet, GCIDE: ``pyro_ar.datasets.fetch_<name>()``), below the first root of
    :func:`~pyro_ar.datasets.data_search_path` that has ``files``; skips the test otherwise."""
    for root in data_search_path():
        if all((root / name / f).is_file() for f in files):
            return root / name
    pytest.skip(f"{name} not found below {data_search_path()} (pyro_ar.datasets.fetch_{name}() or PYRO_AR_DATA)")

ARTICLES = {
    "Bank": ("Bank \\Bank\\ (b[a^][ng]k), n. [OE. banke; akin to E. bench, and\n"
             "   prob. of Scand. origin. See {Bench}.]\n"
             "   1. A mound, pile, or ridge of earth; as, a bank of clouds.\n"
             "      [1913 Webster]\n\n"
             "            They cast up a bank against the city. --2 Sam. xx.\n"
             "      [1913 Webster]\n\n"
             "   2. The margin of a watercourse; the rising ground bordering a\n"
             "      lake or river. --Shak.\n"
             "      [1913 Webster]\n\n"
             "   {Bank swallow}, a small swallow that nests in a bank.\n"
             "      [1913 Webster]\n\n"
             "Bank \\Bank\\, v. t.\n"
             "   To deposit money in a bank.\n"
             "   [1913 Webster]\n"),
    "Abacus": ("Abacus \\Ab\"a*cus\\ ([a^]b\"[.a]*k[u^]s), n.; E. pl. {Abacuses}; L.\n"
               "   pl. {Abaci} (-s[imac]). [L. abacus]\n"
               "   1. A table strewn with sand. [Obs.]\n"
               "      [1913 Webster]\n\n"
               "   2. A calculating frame with balls sliding on wires.\n"
               "      [1913 Webster]\n"),
    "River": ("River \\Riv\"er\\, n.\n"
              "   A large natural stream of water.\n"
              "   [1913 Webster]\n\n"
              "   2. A stream of water flowing to the sea.\n"
              "   [WordNet 1.5]\n"),
    "Aerolite": ("A[\"e]rolite \\A\"[\"e]r*o*lite\\, n.\n"
                 "   A stone that falls from the sky.\n"
                 "   [1913 Webster]\n"),
}
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    digits = ""
    while True:
        digits = B64[n % 64] + digits
        n //= 64
        if n == 0:
            return digits


def write_gcide(root: Path, articles=None) -> Path:
    """A dictd database (root/usr/share/dictd/gcide.{index,dict.dz}) of ``articles``
    ({headword: article}, default ARTICLES), with a database-info entry and a second,
    lower-case headword pointing to the first article (Bank)."""
    folder = root / "usr" / "share" / "dictd"
    folder.mkdir(parents=True)
    text, index = b"", []
    articles = ARTICLES if articles is None else articles
    for head, article in [("00-database-short", "A test dictionary\n")] + list(articles.items()):
        data = article.encode()
        index.append((head, len(text), len(data)))
        text += data
    index.append((index[1][0].lower(), index[1][1], index[1][2]))
    with gzip.open(folder / "gcide.dict.dz", "wb") as f:
        f.write(text)
    (folder / "gcide.index").write_text("".join(f"{h}\t{b64(o)}\t{b64(n)}\n" for h, o, n in index))
    return folder

