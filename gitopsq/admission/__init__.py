"""The admission engine: Kueue's scheduling rules as pure functions of data (docs/admission.md).

Its modules are imported compiled (mypyc) when a build of exactly these sources exists, else as the Python they
are; `ENGINE` says which and why (`gitopsq.native`).
"""

from pathlib import Path

from gitopsq.native import activate

ENGINE = activate(__path__, Path(__file__).resolve().parent)
