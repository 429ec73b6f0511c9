"""What Slurm says of each node now (`scontrol show node --oneliner`, or a saved copy of it): its
state and drain reason, and so which healthy nodes a RESUME line may name.

The tools that resume nodes in production resume only nodes drained for their own reason and
never overwrite an admin's (docs/node-sweep.md): a node drained or down is resumed only when its
reason is mlcheck's own (the prefix of its DRAIN lines) or matches the maintenance reason the
admin names (the whole reason); one drained for another reason, or set aside, is left
alone and listed with its reason; one in service (idle, allocated) has nothing to resume. A
node Slurm shows not responding (`DOWN*`, `IDLE*`), failing, to be rebooted, powered down, in a
maintenance reservation or planned is left alone whatever its reason: resuming it would put a
node that cannot run jobs, or that an admin set aside, in front of users.

When a node was drained is the time in its reason (`Reason=... [user@2026-11-24T07:00:00]`,
Slurm's local time): mlcheck.history.nodes vouches for it only with runs that ended after it.
"""

import re
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mlcheck.errors import InputError

OWN_REASON = 'mlcheck: '          # the start of every reason mlcheck's DRAIN lines write
OUT_OF_SERVICE = {'DRAIN', 'DRAINED', 'DRAINING', 'DOWN'}
# flags of a node that no RESUME line may name, whatever its reason, each with why
LEFT_ALONE = {
    **dict.fromkeys(('MAINTENANCE', 'MAINT', 'RESERVED', 'PLANNED'),
                    'in a maintenance reservation or planned'),
    **dict.fromkeys(('FAIL', 'FAILING'), 'failing'),
    **dict.fromkeys(('REBOOT', 'REBOOT_REQUESTED', 'REBOOT_ISSUED'), 'to be rebooted'),
    **dict.fromkeys(('POWER_DOWN', 'POWERED_DOWN', 'POWERING_DOWN', 'POWERING_UP', 'POWER_UP'),
                    'powered down or powering'),
    **dict.fromkeys(('NO_RESPOND', 'NOT_RESPONDING', 'INVALID_REG', 'UNKNOWN'), 'not responding'),
}
READ_TIMEOUT_S = 20
# the widest offset between two time zones: a drain time read in an unknown zone is this uncertain
ZONE_UNCERTAINTY = 14 * 3600
RESERVATION = frozenset({'MAINTENANCE', 'MAINT', 'RESERVED'})
_NAME = re.compile(r'^NodeName=(\S+)')
_STATE = re.compile(r'\sState=(\S+)')
_PARTITIONS = re.compile(r'\sPartitions=(\S*)')
_FEATURES = re.compile(r'\sAvailableFeatures=(\S*)')
# the reason, up to Slurm's ' [user@time]' after it (the reason itself may hold spaces)
_REASON = re.compile(r'\sReason=(.*) \[[^\[\]]*@([^\[\]]*)\]')
_BARE_REASON = re.compile(r'\sReason=(.*?)(?=\s\w+=|$)')


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str                 # Slurm's, flags joined by '+': IDLE+DRAIN, DOWN+DRAIN+MAINTENANCE
    reason: str = ''
    partitions: tuple = ()
    since: float = None        # when its reason was set (Unix seconds), None where not said
    features: frozenset = frozenset()   # what a job's --constraint selects it by (gpu, a100)

    @property
    def flags(self):
        # Slurm marks some states with a character after them (DOWN*: not responding)
        return {flag.strip('*~#!%$@^-') for flag in self.state.upper().split('+')}

    @property
    def out_of_service(self):
        return bool(self.flags & OUT_OF_SERVICE)

    @property
    def set_aside(self):
        """Why no RESUME line may name it whatever its reason, '' when none."""
        if '*' in self.state:      # DOWN*, IDLE*: slurmctld has no answer from its slurmd
            return f'not responding ({self.state})'
        why = sorted({LEFT_ALONE[flag] for flag in self.flags if flag in LEFT_ALONE})
        return f'{" and ".join(why)} ({self.state})' if why else ''


def zone(name):
    """The time zone `name` (--slurm-tz), an InputError naming it where unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f'--slurm-tz {name!r}: not a time zone (UTC, Europe/Helsinki)') from None


def parse(text, where, tz=None):
    """{node: NodeState} of `scontrol show node` output, one line per node or not; an
    InputError naming `where` when it holds no node."""
    found = {}
    for record in re.split(r'(?m)^(?=NodeName=)', text):
        record = ' '.join(record.split())
        name = _NAME.match(record)
        if not name:
            continue
        state = _STATE.search(record)
        reason = _REASON.search(record) or _BARE_REASON.search(record)
        partitions = _PARTITIONS.search(record)
        features = _FEATURES.search(record)
        found[name.group(1)] = NodeState(
            name.group(1), state.group(1) if state else '',
            reason.group(1).strip() if reason and reason.group(1) != '(null)' else '',
            tuple(filter(None, partitions.group(1).split(','))) if partitions else (),
            _since(_REASON.search(record), tz),
            frozenset(features.group(1).split(',')) - {'(null)', ''} if features else frozenset())
    if not found:
        raise InputError(f'{where}: no node in it (expected `scontrol show node --oneliner`)')
    return found


def _since(match, tz=None):
    """Slurm's time of a reason, which it writes in the cluster's local time without a zone:
    read in `tz` (a ZoneInfo), else in the local time where the command runs; None where not said
    or unreadable."""
    try:
        when = datetime.fromisoformat(match.group(2)) if match else None
        return (when.replace(tzinfo=tz) if tz and not when.tzinfo else when).timestamp() \
            if when else None
    except ValueError:
        return None


def read(path=None, tz=None):
    """({node: NodeState}, '') from the saved file `path`, else from `scontrol show node
    --oneliner` run here; (None, why not) where Slurm cannot be read from here. `tz`: the zone of
    Slurm's times (default: the local one)."""
    if path:
        try:
            with open(path, errors='replace') as stream:
                return parse(stream.read(), path, tz), ''
        except OSError as err:
            raise InputError(f'--slurm-states {path}: {err.strerror}') from None
    try:
        done = subprocess.run(['scontrol', 'show', 'node', '--oneliner'], capture_output=True,
                              text=True, errors='replace', timeout=READ_TIMEOUT_S)
    except FileNotFoundError:
        return None, 'no scontrol here'
    except subprocess.TimeoutExpired:
        return None, f'scontrol gave no answer within {READ_TIMEOUT_S} s'
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ['no message'])[0][:120]
        return None, f'scontrol failed: {first}'
    try:
        return parse(done.stdout, 'scontrol show node', tz), ''
    except InputError as err:
        return None, str(err)


@dataclass
class ResumePlan:
    resume: list = field(default_factory=list)        # healthy, drained for mlcheck's reason
    left_alone: dict = field(default_factory=dict)    # {node: why}: another reason, or set aside
    in_service: list = field(default_factory=list)    # healthy and not drained: nothing to resume
    # healthy, not drained, in a maintenance reservation: ending it returns them, nothing to resume
    in_reservation: list = field(default_factory=list)
    unchecked: str = ''                               # why Slurm was not read ('' when it was)
    no_lines: str = ''        # why no scontrol line is printed at all ('' when they are)


def ours(state, resume_reason=None):
    """Whether the node's reason is mlcheck's own or the maintenance's (`resume_reason` matching
    the whole reason): the only reasons mlcheck's lines may replace."""
    return (state.reason.startswith(OWN_REASON)
            or bool(resume_reason and resume_reason.fullmatch(state.reason)))


def resumable(state, resume_reason=None):
    """Whether a RESUME line may name the node in `state`: out of service, not set aside, for
    mlcheck's own reason or the maintenance's."""
    return state.out_of_service and not state.set_aside and ours(state, resume_reason)


def in_reservation_only(state):
    """Whether a node is set aside only by a maintenance reservation, responding and not drained
    (the reservation flow of docs/node-sweep.md: ending the reservation returns it to users)."""
    return (not state.out_of_service and '*' not in state.state
            and state.flags & RESERVATION and not {f for f in state.flags if f in LEFT_ALONE}
            - RESERVATION)


def drained_by_another(state, resume_reason=None):
    """The reason of a node drained or down for a reason that is neither mlcheck's nor the
    maintenance's (an admin's ticket), '' otherwise: no DRAIN line may overwrite it."""
    return (state.reason if state.out_of_service and state.reason
            and not ours(state, resume_reason) else '')


def resume_plan(healthy, states, why_unread='', resume_reason=None):
    """Which of the `healthy` nodes the RESUME line may name, given Slurm's `states` (None: not
    read, for `why_unread`) and the admin's maintenance reason (a compiled pattern that must match
    the whole reason, or None: 'upgrade 2026-11' never resumes 'upgrade 2026-11 done, but GPU2
    ECC errors: ticket 5530')."""
    plan = ResumePlan(unchecked=why_unread if states is None else '')
    for node in healthy:
        now = states.get(node) if states is not None else None
        if states is None:
            plan.resume.append(node)
        elif now is None:
            plan.left_alone[node] = 'Slurm does not know it'
        elif in_reservation_only(now):
            plan.in_reservation.append(node)
        elif now.set_aside:
            plan.left_alone[node] = now.set_aside
        elif not now.out_of_service:
            plan.in_service.append(node)
        elif resumable(now, resume_reason):
            plan.resume.append(node)
        else:
            plan.left_alone[node] = f'drained for another reason: {now.reason!r}'
    return plan
