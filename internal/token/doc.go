// Package token makes and checks the tokens that keep results and cancels
// from being forged by anyone who can publish on the bus.
//
// Every released attempt of a tool carries a result token, an HMAC-SHA256
// of its planId, toolId and attempt under a key only dispatchers hold
// (Key.Result). The worker that runs the call echoes the token in its
// result, and a dispatcher applies a result only if the token is the one
// it would make itself (Key.CheckResult, a constant-time comparison). The
// check needs no state, so a forged result costs a dispatcher one HMAC.
//
// Cancels go the other way: workers hold no key. Each call carries the
// SHA-256 digest of its plan's cancel token (Key.Cancel, another HMAC under
// the same key), and a dispatcher's cancel reveals the token itself. A
// worker acts on a cancel only when the token's Digest equals the one its
// call carries, so reading calls is not enough to forge one.
//
// Tokens are 43 characters of unpadded base64url (32 bytes). The messages
// the key signs are length-prefixed and labelled, so no two (planId,
// toolId, attempt) triples, and no result and cancel, share a token.
//
// The key lives in the KV bucket planbus-keys under KVKey; Load reads it,
// or creates it when no dispatcher has yet (a KV create, so dispatchers
// starting together agree on one). MsgID derives the de-duplication id of
// calls and results from the result token, so nobody who lacks the token
// can take a message id first.
package token
