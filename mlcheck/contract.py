"""The programs' side of the contract (src/pytorch/mlcheck_contract.py), for the judging side.

That file is the one copy: the programs import it inside the images, where mlcheck is not
installed, and src/ is no package, so it is loaded here by path and its names re-exported
(program_module: any such module of src/pytorch, the knob tables too).
"""

import importlib.util
import os
import sys

from mlcheck import REPO

PATH = os.path.join(REPO, 'src', 'pytorch', 'mlcheck_contract.py')


def program_module(name):
    """src/pytorch/<name>.py as a module: the one the programs' imports already loaded (tests put
    src/pytorch on sys.path), else loaded now and kept under its name, so that both sides share it."""
    path = os.path.join(os.path.dirname(PATH), name + '.py')
    known = sys.modules.get(name)
    if known is not None and os.path.realpath(getattr(known, '__file__', '')) == os.path.realpath(path):
        return known
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if known is None:
        sys.modules[name] = module
    return module


_contract = program_module('mlcheck_contract')
FACT_PREFIX, EVENTS, VARIABLES = _contract.FACT_PREFIX, _contract.EVENTS, _contract.VARIABLES
format_fact = _contract.format_fact
FAULT_KINDS, FAULT_FORMS, FAULT_VAR = _contract.FAULT_KINDS, _contract.FAULT_FORMS, _contract.FAULT_VAR
FaultError, parse_fault, format_fault = _contract.FaultError, _contract.parse_fault, _contract.format_fault
RENDEZVOUS_TIMEOUT, COLLECTIVE_TIMEOUT = _contract.RENDEZVOUS_TIMEOUT, _contract.COLLECTIVE_TIMEOUT
RENDEZVOUS_TIMEOUT_VAR = _contract.RENDEZVOUS_TIMEOUT_VAR
COLLECTIVE_TIMEOUT_VAR = _contract.COLLECTIVE_TIMEOUT_VAR
parse_cpulist, format_cpulist, spans = _contract.parse_cpulist, _contract.format_cpulist, _contract.spans
