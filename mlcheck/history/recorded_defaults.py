"""What a run recorded before a knob existed ran: {check: {knob: value as a run records
it}} (mlcheck.history.settings). Generated from the checks by `python -m
mlcheck.harness.knob_table --write` (a test ties the two); mlcheck-report reads it, where
ReFrame may not be installed. Do not edit."""

RECORDED_DEFAULTS = {
    "CIFAR100ResNetCheck": {
        "model": "resnet152",
        "batch_size": "128",
        "epochs": "3",
        "steps": "0",
        "warmup_steps": "10",
        "workers": "4",
        "solo_steps": "10",
        "data": "loader",
        "augment": "False",
        "amp": "False",
        "channels_last": "False",
        "mode": "ddp"
    },
    "InterconnectCheck": {
        "min_bytes": "8",
        "max_bytes": "1073741824",
        "factor": "4",
        "p2p_bytes": "268435456",
        "pair_partners": "3",
        "pair_ranks": "0"
    },
    "MNISTDistributedCheck": {
        "epochs": "10",
        "batch_size": "64"
    }
}
