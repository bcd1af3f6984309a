// Package pki names the PEM files of one side of a TLS connection and
// makes them: a certificate authority kept in a directory and the
// certificates it issues. accelnet uses it for every TLS it speaks (the
// REST API, etcd's client and peer traffic, P4Runtime and gNMI), to
// protect the embedded etcd with client certificates in its data
// directory, and for `accelnet certs`, the first-run step of the shipped
// deployments.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files names PEM files for one side of a TLS connection.
type Files struct {
	// CA verifies the peer: for a client, the server's certificate; for
	// a server, client certificates (mutual TLS).
	CA string
	// Cert and Key are this side's certificate and key (for a client:
	// presented for mutual TLS).
	Cert, Key string
	// ServerName overrides the name a client checks in the server's
	// certificate (default: the host of the address it dials).
	ServerName string
}

// Enabled says whether any file is named.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

func (f Files) pair() ([]tls.Certificate, error) {
	if f.Cert == "" && f.Key == "" {
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS: a certificate needs its key and a key its certificate")
	}
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS: load %s / %s: %w", f.Cert, f.Key, err)
	}
	return []tls.Certificate{c}, nil
}

func (f Files) pool() (*x509.CertPool, error) {
	if f.CA == "" {
		return nil, nil
	}
	data, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("TLS: read CA %s: %w", f.CA, err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("TLS: %s holds no PEM certificate", f.CA)
	}
	return p, nil
}

// ClientConfig is the TLS configuration of a client: CA (nil: the
// system's roots) and, for mutual TLS, Cert and Key.
func (f Files) ClientConfig() (*tls.Config, error) {
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	roots, err := f.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: certs, ServerName: f.ServerName}, nil
}

// ServerConfig is the TLS configuration of a server: Cert and Key, and
// with CA, client certificates required and verified against it.
func (f Files) ServerConfig() (*tls.Config, error) {
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	if certs == nil {
		return nil, errors.New("TLS: a server needs a certificate and key")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}
	if f.CA != "" {
		if cfg.ClientCAs, err = f.pool(); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Validity of what this package issues, and how close to its end a
// certificate is issued anew (at the next start or run of `accelnet certs`).
const (
	CAValidity    = 10 * 365 * 24 * time.Hour
	LeafValidity  = 365 * 24 * time.Hour
	RenewalMargin = 30 * 24 * time.Hour
)

// CA is a certificate authority whose certificate and key are PEM files in
// a directory (ca.crt, and ca.key of mode 0600).
type CA struct {
	Cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	CertFile string
	dir      string
}

// LoadOrCreateCA loads the CA in dir, or makes one named name if dir holds
// none (dir is created with mode 0700).
func LoadOrCreateCA(dir, name string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	ca := &CA{CertFile: filepath.Join(dir, "ca.crt"), dir: dir}
	keyFile := filepath.Join(dir, "ca.key")
	cert, key, err := load(ca.CertFile, keyFile)
	switch {
	case err == nil && cert.IsCA && time.Until(cert.NotAfter) > RenewalMargin:
		ca.Cert, ca.key = cert, key
		return ca, nil
	case err == nil || !errors.Is(err, os.ErrNotExist):
		if err == nil {
			err = errors.New("not a CA, or about to expire")
		}
		return nil, fmt.Errorf("certificates: the CA in %s cannot be used (%v): move it away to make a new one, and issue every certificate again", dir, err)
	}
	if ca.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"accelnet"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CAValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	if ca.Cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := writeKey(keyFile, ca.key); err != nil {
		return nil, err
	}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der, 0o644)
}

// Issue returns the files of a certificate named name (name.crt, and
// name.key of mode 0600, in the CA's directory) for hosts (DNS names or IP
// addresses), good for both server and client authentication. A
// certificate already there is kept if this CA signed it, it names every
// host and it is not about to expire; otherwise it is issued anew.
func (ca *CA) Issue(name string, hosts []string) (Files, error) {
	f := Files{CA: ca.CertFile, Cert: filepath.Join(ca.dir, name+".crt"), Key: filepath.Join(ca.dir, name+".key")}
	if cert, _, err := load(f.Cert, f.Key); err == nil && ca.signed(cert) && covers(cert, hosts) && time.Until(cert.NotAfter) > RenewalMargin {
		return f, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"accelnet"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(LeafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return f, err
	}
	if err := writeKey(f.Key, key); err != nil {
		return f, err
	}
	return f, writePEM(f.Cert, "CERTIFICATE", der, 0o644)
}

func (ca *CA) signed(cert *x509.Certificate) bool {
	return cert.CheckSignatureFrom(ca.Cert) == nil
}

// covers says whether cert names every host.
func covers(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

// load reads a certificate and its ECDSA key.
func load(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		if _, statErr := os.Stat(certFile); errors.Is(statErr, os.ErrNotExist) {
			return nil, nil, statErr
		}
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return cert, nil, fmt.Errorf("%s: not an ECDSA key", keyFile)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes one PEM block to path atomically (a reader never sees
// half a file), with mode.
func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := pem.Encode(tmp, &pem.Block{Type: kind, Bytes: der}); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	return nil
}
