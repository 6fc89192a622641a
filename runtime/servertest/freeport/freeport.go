// Package freeport finds a free TCP port on 127.0.0.1 for a server a test
// or a driver is about to start (PostgreSQL, versitygw, a runtime's API or
// embedded broker). The port is free when returned: another process may
// still take it before the server listens.
package freeport

import (
	"net"
	"strconv"
)

// Port returns a free TCP port on 127.0.0.1.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns 127.0.0.1:PORT with a free port.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
