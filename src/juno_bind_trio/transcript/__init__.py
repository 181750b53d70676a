"""Transcript healing: repair a cut-short or corrupted transcript so a provider accepts it.

See [`heal_transcript()`][juno_bind_trio.transcript.heal_transcript], and the explanation page
"Transcript healing" for why each repair is the one it is.
"""

from juno_bind_trio._errors import TranscriptError as TranscriptError
from juno_bind_trio._public import publish as _publish

from ._heal import HealAction as HealAction
from ._heal import HealChange as HealChange
from ._heal import HealResult as HealResult
from ._heal import heal_transcript as heal_transcript

__all__ = [
    "HealAction",
    "HealChange",
    "HealResult",
    "TranscriptError",
    "heal_transcript",
]

_publish(__name__, globals(), __all__)
