"""Read a tutorial (a jupytext "percent" script) as a Python notebook, for myst-nb.

``jupytext.reads`` gives the cells; the script has no notebook header, so the kernel and
language are set here (the Python kernel runs it, its cells are highlighted as Python).
"""

import jupytext


def read_percent_script(text: str):
    """The notebook of a ``# %%`` script, with a Python kernelspec and language info.

    >>> nb = read_percent_script("# %% [markdown]\\n# # Title\\n\\n# %%\\nx = 1\\n")
    >>> [c.cell_type for c in nb.cells], nb.metadata["kernelspec"]["name"]
    (['markdown', 'code'], 'python3')
    """
    nb = jupytext.reads(text, fmt="py:percent")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb
