"""The dedup review page (design §8.1): a small HTTP server inside the gateway
process. A person signs in with their member token; every read and every
decision is a call to the gateway's own gRPC API with that token, so the same
authentication, eligibility and validation apply as for any agent.

Sessions: the token is entered once in a form and kept on the server, in
memory; the browser holds only a random session id in an HttpOnly,
SameSite=Strict cookie. Page scripts can never read the token (there are no
scripts at all: plain HTML forms), a cross-site form cannot ride on the
cookie, a form's Origin must be the page's (the Host, or the public origins
the operator names: origins.py), and every form carries a per-session CSRF
token as well. A gateway
restart signs everyone out, which is the safe direction; so does a token
revoked or expired (the next page view ends its session). Signing in again
ends the session the browser held: the id is rotated, never kept alive
beside the new one.

Decisions, one pair at a time, nothing automatic:
- keep both: the pair is dismissed and never proposed again (for the
  revisions shown: a memory changed since refuses it, as it refuses each
  decision below);
- supersede one with the other's text: the outdated memory is superseded by
  a new memory carrying the kept memory's kind, title, body, confidence and
  mentions (the supersede tool always writes a new memory); the outdated one
  stays readable and points to it. The new memory is derived from the kept
  one (a derived_from link) and gets the derive rule's trust (design §4):
  the intersection of both memories' audiences and purposes, so the kept
  text never reaches anyone it was not written for (an outdated memory
  that was derived passes its sources on too, design §4);
- forget one, with a reason.

Entity pairs (design §8.5), shown to owners: two entities that may be one,
side by side with what the owner may see of each (attributes, relations,
aliases, mentioning memories) and why they were proposed. The owner merges
(keeping one's name; reversible, nothing rewritten), keeps them apart (never
proposed again), or undoes a merge in force. Nothing merges by itself.

Bounds: a request's head (request line and headers) and form body are
capped and a body is refused by its declared length before any of it is
read; sign-in sessions are capped per token and in all; connections are
capped in number and closed when idle.
"""

from services.gateway.review_web.app import ReviewApp
from services.gateway.review_web.http import ReviewWeb, gateway_target
from services.gateway.review_web.sessions import Session, Sessions

__all__ = ["ReviewApp", "ReviewWeb", "Session", "Sessions", "gateway_target"]
