package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// KeySize is the length of a key in bytes.
const KeySize = 32

// Len is the length of a token (and of a digest) in characters.
const Len = 43

// ErrBadKey is matched by the errors of keys that cannot be used.
var ErrBadKey = errors.New("token: bad key")

// Labels keep the messages of each kind apart.
const (
	labelResult = "planbus result token v1\x00"
	labelCancel = "planbus cancel token v1\x00"
	labelMsgID  = "planbus message id v1\x00"
)

var enc = base64.RawURLEncoding

// Key signs and checks tokens. It is safe for concurrent use.
type Key struct {
	macs sync.Pool // of hash.Hash: HMAC-SHA256 under the key
}

// NewKey returns a random key, and its bytes to store.
func NewKey() (*Key, []byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, nil, fmt.Errorf("token: random key: %w", err)
	}
	k, err := FromBytes(b)
	return k, b, err
}

// FromBytes returns the key made of b, which must be KeySize bytes.
func FromBytes(b []byte) (*Key, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), KeySize)
	}
	secret := append([]byte(nil), b...)
	k := &Key{}
	k.macs.New = func() any { return hmac.New(sha256.New, secret) }
	return k, nil
}

// Result is the token of one attempt of one tool.
func (k *Key) Result(planID, toolID string, attempt int) string {
	var buf [128]byte
	msg := append(buf[:0], labelResult...)
	msg = appendField(msg, planID)
	msg = appendField(msg, toolID)
	msg = binary.AppendUvarint(msg, uint64(attempt))
	return k.sign(msg)
}

// CheckResult reports whether tok is the token of this attempt. The
// comparison takes the same time whatever tok holds.
func (k *Key) CheckResult(planID, toolID string, attempt int, tok string) bool {
	return subtle.ConstantTimeCompare([]byte(k.Result(planID, toolID, attempt)), []byte(tok)) == 1
}

// Cancel is the token that a cancel of planID reveals. Calls carry its
// Digest.
func (k *Key) Cancel(planID string) string {
	var buf [128]byte
	msg := append(buf[:0], labelCancel...)
	msg = appendField(msg, planID)
	return k.sign(msg)
}

func (k *Key) sign(msg []byte) string {
	mac := k.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write(msg)
	var sum [sha256.Size]byte
	out := enc.EncodeToString(mac.Sum(sum[:0]))
	k.macs.Put(mac)
	return out
}

// appendField appends s with its length in front, so that fields cannot
// run into each other ("a/b","c" and "a","b/c" sign different messages).
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Digest is the SHA-256 of a cancel token, as calls carry it. Knowing it
// does not tell the token.
func Digest(cancelToken string) string {
	sum := sha256.Sum256([]byte(cancelToken))
	return enc.EncodeToString(sum[:])
}

// MsgID is the Nats-Msg-Id of a call and of its result: the idempotency
// key planId/toolId/attempt followed by a tag derived from the attempt's
// result token. JetStream de-duplicates by it, so an id anyone could guess
// would let a forger who publishes first have the real call or result
// dropped as a duplicate; the tag makes it as hard to guess as the token.
// Redeliveries and republishes of the same attempt get the same id.
func MsgID(idempotencyKey, resultToken string) string {
	h := sha256.New()
	h.Write([]byte(labelMsgID))
	h.Write([]byte(resultToken))
	var sum [sha256.Size]byte
	return idempotencyKey + "/" + enc.EncodeToString(h.Sum(sum[:0])[:12])
}
