"""The public import path of the payload codec, kept for users:
`data_converter=overnight.codec.data_converter()` (docs/encryption.md, docs/from-your-code.md).
The codec lives in the ground, `overnight.core.codec`; this re-exports its public names, the
same objects. overnight's own code imports `overnight.core.codec`, never this (.importlinter,
tests/ground/test_public_paths.py).
"""

from __future__ import annotations

from overnight.core.codec import CODEC_KEYS_ENV as CODEC_KEYS_ENV
from overnight.core.codec import ENCODING as ENCODING
from overnight.core.codec import KEY_BYTES as KEY_BYTES
from overnight.core.codec import KEY_ID_METADATA as KEY_ID_METADATA
from overnight.core.codec import NONCE_BYTES as NONCE_BYTES
from overnight.core.codec import TAG_BYTES as TAG_BYTES
from overnight.core.codec import CodecConfigError as CodecConfigError
from overnight.core.codec import CodecKey as CodecKey
from overnight.core.codec import CodecKeyError as CodecKeyError
from overnight.core.codec import EncryptionCodec as EncryptionCodec
from overnight.core.codec import Keyring as Keyring
from overnight.core.codec import data_converter as data_converter
from overnight.core.codec import describe as describe
from overnight.core.codec import encrypts as encrypts
from overnight.core.codec import keyring_from_env as keyring_from_env
from overnight.core.codec import parse_keys as parse_keys
