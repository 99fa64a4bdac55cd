package control

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

// TestMountKeysReadBackWhatNewMountKeyWrote: the two halves NewMountKey
// writes are read back as one key pair, a file's final newline included,
// and what is not a key is refused with the reason.
func TestMountKeysReadBackWhatNewMountKeyWrote(t *testing.T) {
	priv, pub, err := NewMountKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseMountKey(priv + "\n")
	if err != nil {
		t.Fatalf("ParseMountKey of a new key: %v", err)
	}
	p, err := ParseMountPublicKey(pub)
	if err != nil {
		t.Fatalf("ParseMountPublicKey of a new key: %v", err)
	}
	if !ed25519.Verify(p, []byte("m"), ed25519.Sign(k, []byte("m"))) {
		t.Error("the private key read back does not sign for the public key read back")
	}
	if got, err := MountPublicKey(priv); err != nil || got != pub {
		t.Errorf("MountPublicKey = %q, %v; want %q", got, err, pub)
	}
	for name, bad := range map[string]string{"not base64": "key!", "too short": "c2hvcnQ=", "empty": ""} {
		if _, err := ParseMountKey(bad); err == nil || !strings.Contains(err.Error(), "32-byte seed") {
			t.Errorf("ParseMountKey of %s: %v, want the reason", name, err)
		}
		if _, err := ParseMountPublicKey(bad); err == nil || !strings.Contains(err.Error(), "32 bytes") {
			t.Errorf("ParseMountPublicKey of %s: %v, want the reason", name, err)
		}
	}
}
