"""Channels to the stack's internal services for tests that call them
directly: each call vouched for with the stack's internal key (the Caller in
the request, else as the operator; recallatron.internal_channels.member_channel)."""

from __future__ import annotations

import grpc

from recallatron import internal_auth, internal_channels
from recallatron.grpcclient import make_channel
from recallatron_devkit.stack import Stack


def channel(stack: Stack, service: str) -> grpc.Channel:
    signer = internal_auth.Signer(stack.internal_key, "test")
    return internal_channels.member_channel(make_channel(stack.address(service)), signer)
