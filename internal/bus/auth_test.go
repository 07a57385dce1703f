package bus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/planbus/planbus/internal/bus"
	"github.com/planbus/planbus/internal/bus/bustest"
)

func dialErr(cfg bus.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := bus.Dial(ctx, cfg, zerolog.Nop())
	if err == nil {
		defer c.Close()
		return c.Declare(ctx)
	}
	return err
}

func TestDialWithAnNKeySeed(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })

	if err := dialErr(cfg); err == nil {
		t.Fatal("a client without the nkey got in")
	}
	cfg.NKeySeedFile = seedFile
	if err := dialErr(cfg); err != nil {
		t.Fatalf("with the nkey seed: %v", err)
	}
}

func TestDialWithATLSCA(t *testing.T) {
	dir := t.TempDir()
	caFile, serverCert := makeCerts(t, dir)
	cfg := bustest.StartBare(t, func(o *server.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}
		o.TLS, o.TLSTimeout = true, 2
	})
	err := dialErr(cfg)
	if err == nil {
		t.Fatal("a client that does not trust the server's CA connected")
	}
	cfg.TLSCAFile = caFile
	if err := dialErr(cfg); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
}

func TestDialNamesABadCredentialsFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(bad, []byte("not a creds file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := bustest.StartBare(t)
	cfg.CredsFile = bad
	err := dialErr(cfg)
	if err == nil || !strings.Contains(err.Error(), cfg.URL) {
		t.Fatalf("err = %v, want a failure naming %s", err, cfg.URL)
	}
}

// makeCerts writes a CA certificate and returns its file and a server
// certificate for 127.0.0.1 signed by it.
func makeCerts(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "planbus test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
}

// Credentials the server refuses fail at once: waiting would not help.
func TestDialFailsFastWhenRefused(t *testing.T) {
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	cfg := bustest.StartBare(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	other, _ := nkeys.CreateUser()
	seed, _ := other.Seed()
	cfg.NKeySeedFile = filepath.Join(t.TempDir(), "other.nk")
	if err := os.WriteFile(cfg.NKeySeedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := bus.Dial(ctx, cfg, zerolog.Nop())
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("err = %v, want an authorization error", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Dial kept retrying a refused client for %s", time.Since(start))
	}
}
