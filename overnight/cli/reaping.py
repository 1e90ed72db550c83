"""`overnight reap`'s logic lives in overnight.worker.reaping (the worker runs it on a schedule
too); its names stay importable from here."""

from overnight.worker.reaping import ReapedSandbox as ReapedSandbox
from overnight.worker.reaping import reap as reap
