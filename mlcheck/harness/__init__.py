"""The ReFrame side: the checks' base classes, their knobs, the GPU telemetry plugin and the config pieces every site shares."""
