package s3test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/picomq/pico-connectors/runtime/servertest/tlstest"
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
	crt := filepath.Join(dir, "public.crt")
	return crt, tlstest.Write(crt, filepath.Join(dir, "private.key"))
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
