package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/accelnet/accelnet/internal/pki"
	"github.com/accelnet/accelnet/tenancy"
)

// The Secrets `accelnet certs --kubernetes` keeps: the CA (its key
// included, to issue more), one kubernetes.io/tls Secret per name (tls.crt,
// tls.key and ca.crt, as cert-manager writes them) and the first
// operator token.
const (
	caSecret            = "accelnet-ca"
	operatorTokenSecret = "accelnet-operator-token"
)

// serviceAccountDir is where a pod finds its service account's token,
// the cluster's CA and its namespace.
var serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kubeAPI is the little of the Kubernetes API the Job needs: read and
// create Secrets of one namespace, as the pod's service account.
type kubeAPI struct {
	base, namespace, token string
	client                 *http.Client
}

func inClusterAPI(namespace string) (*kubeAPI, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("--kubernetes: not in a pod (KUBERNETES_SERVICE_HOST is not set)")
	}
	token, err := os.ReadFile(filepath.Join(serviceAccountDir, "token"))
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: the service account's token: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("--kubernetes: the cluster's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("--kubernetes: the cluster's CA holds no certificate")
	}
	if namespace == "" {
		ns, err := os.ReadFile(filepath.Join(serviceAccountDir, "namespace"))
		if err != nil {
			return nil, fmt.Errorf("--kubernetes: this pod's namespace: %w (or give --namespace)", err)
		}
		namespace = strings.TrimSpace(string(ns))
	}
	return &kubeAPI{
		base: "https://" + net.JoinHostPort(host, port), namespace: namespace, token: strings.TrimSpace(string(token)),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}},
	}, nil
}

type secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   secretMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data"`
}

type secretMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

var errSecretExists = errors.New("the Secret exists")

func (k *kubeAPI) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Content-Type", "application/json")
	return k.client.Do(req)
}

// getSecret reads a Secret's data (ok false: there is none).
func (k *kubeAPI) getSecret(ctx context.Context, name string) (map[string][]byte, bool, error) {
	resp, err := k.do(ctx, http.MethodGet, "/api/v1/namespaces/"+k.namespace+"/secrets/"+name, nil)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		var s secret
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return nil, false, fmt.Errorf("Secret %s: %w", name, err)
		}
		return s.Data, true, nil
	case http.StatusNotFound:
		return nil, false, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return nil, false, fmt.Errorf("read Secret %s: HTTP %d: %s", name, resp.StatusCode, bytes.TrimSpace(msg))
}

// createSecret creates a Secret (errSecretExists if one of that name is
// there: another Job ran at the same time).
func (k *kubeAPI) createSecret(ctx context.Context, name, typ string, data map[string][]byte) error {
	body := secret{APIVersion: "v1", Kind: "Secret", Type: typ, Data: data,
		Metadata: secretMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "accelnet", "app.kubernetes.io/managed-by": "accelnet-certs"}}}
	resp, err := k.do(ctx, http.MethodPost, "/api/v1/namespaces/"+k.namespace+"/secrets", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusOK:
		return nil
	case http.StatusConflict:
		return errSecretExists
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("create Secret %s: HTTP %d: %s", name, resp.StatusCode, bytes.TrimSpace(msg))
}

// kubeCerts keeps the CA, a certificate per name and the first operator
// token in Secrets of the namespace, making what is missing. The CA comes
// from its Secret when there is one, so a certificate made later is
// signed by the CA the others trust.
func kubeCerts(ctx context.Context, out io.Writer, namespace string, names []string, hosts map[string][]string) error {
	k, err := inClusterAPI(namespace)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "accelnet-certs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	caDir := filepath.Join(work, "ca")
	for attempt := 0; ; attempt++ {
		data, found, err := k.getSecret(ctx, caSecret)
		if err != nil {
			return err
		}
		if found {
			if err := os.MkdirAll(caDir, 0o700); err != nil {
				return err
			}
			for _, f := range []string{"ca.crt", "ca.key"} {
				if err := os.WriteFile(filepath.Join(caDir, f), data[f], 0o600); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "Secret %s: kept\n", caSecret)
			break
		}
		ca, err := pki.LoadOrCreateCA(caDir, "accelnet "+k.namespace+" CA")
		if err != nil {
			return err
		}
		caCrt, _ := os.ReadFile(ca.CertFile)
		caKey, _ := os.ReadFile(filepath.Join(caDir, "ca.key"))
		err = k.createSecret(ctx, caSecret, "Opaque", map[string][]byte{"ca.crt": caCrt, "ca.key": caKey})
		if errors.Is(err, errSecretExists) && attempt == 0 {
			os.RemoveAll(caDir) // another Job made it first: use that one
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Secret %s: made\n", caSecret)
		break
	}
	ca, err := pki.LoadOrCreateCA(caDir, "")
	if err != nil {
		return err
	}
	caCrt, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, found, err := k.getSecret(ctx, name); err != nil {
			return err
		} else if found {
			fmt.Fprintf(out, "Secret %s: kept\n", name)
			continue
		}
		names := hosts[name]
		for _, h := range hosts[name] {
			// A Service's name, as its clients in the cluster write it.
			if !strings.Contains(h, ".") && net.ParseIP(h) == nil && h != "localhost" {
				names = append(names, h+"."+k.namespace+".svc", h+"."+k.namespace+".svc.cluster.local")
			}
		}
		f, err := ca.Issue(name, names)
		if err != nil {
			return err
		}
		crt, _ := os.ReadFile(f.Cert)
		key, _ := os.ReadFile(f.Key)
		err = k.createSecret(ctx, name, "kubernetes.io/tls", map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": caCrt})
		if err != nil && !errors.Is(err, errSecretExists) {
			return err
		}
		fmt.Fprintf(out, "Secret %s: made (for %s)\n", name, strings.Join(names, ", "))
	}
	if _, found, err := k.getSecret(ctx, operatorTokenSecret); err != nil {
		return err
	} else if found {
		fmt.Fprintf(out, "Secret %s: kept\n", operatorTokenSecret)
		return nil
	}
	token, err := tenancy.NewSecret()
	if err != nil {
		return err
	}
	if err := k.createSecret(ctx, operatorTokenSecret, "Opaque", map[string][]byte{"token": []byte(token)}); err != nil && !errors.Is(err, errSecretExists) {
		return err
	}
	fmt.Fprintf(out, "Secret %s: made (the first operator token, registered when accelnet first starts)\n", operatorTokenSecret)
	return nil
}
