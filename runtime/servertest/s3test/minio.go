package s3test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// minioSetup returns the extra arguments and environment of a MinIO
// server started with opts, with the KMS key's name and the CA file (""
// when not asked for); it writes the certificate into tmp/certs for TLS.
func minioSetup(tmp string, opts MinioOptions) (args, env []string, kmsKey, caFile string, err error) {
	if opts.KMS {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, nil, "", "", err
		}
		kmsKey = "pico-key"
		env = append(env, "MINIO_KMS_SECRET_KEY="+kmsKey+":"+base64.StdEncoding.EncodeToString(key))
	}
	if opts.TLS {
		certs := filepath.Join(tmp, "certs")
		if caFile, err = writeSelfSigned(certs); err != nil {
			return nil, nil, "", "", err
		}
		args = append(args, "--certs-dir", certs)
	}
	return args, env, kmsKey, caFile, nil
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key into dir, as MinIO's certs dir wants them (public.crt,
// private.key), and returns the certificate's path.
func writeSelfSigned(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "s3test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	crt := filepath.Join(dir, "public.crt")
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "private.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", err
	}
	return crt, nil
}

// httpClientCA is an HTTP client trusting only the certificates of caFile.
func httpClientCA(caFile string) (*http.Client, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("s3test: no certificate in %s", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
