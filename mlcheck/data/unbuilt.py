"""The marker an image build leaves beside an image it could not build, with the reason: written
by the builder (data.images), read by the site model when a configured image is missing, so that
the test is skipped saying why. A leaf: the site model does not depend on the builder.
"""

UNBUILT_SUFFIX = '.unbuilt'


def unbuilt_reason(path):
    """Why the image at `path` was not built, as its build recorded it; None if it did not."""
    try:
        with open(path.rstrip('/') + UNBUILT_SUFFIX) as f:
            return f.read().strip() or 'no reason recorded'
    except OSError:
        return None
