package freeport

import (
	"net"
	"testing"
)

func TestAddrCanBeListenedOn(t *testing.T) {
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}
