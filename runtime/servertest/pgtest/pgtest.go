// Package pgtest starts a real PostgreSQL 15 server for tests, configured for
// logical decoding (wal_level = logical), in a temporary folder that is
// removed when the test ends.
//
// The server binaries come from Debian's postgresql-15 package. initdb and
// pg_ctl refuse to run as root, so when the tests run as root the data
// folder is handed to the postgres user and every command runs through
// runuser. When the binaries are missing a test fails with the install
// command under CI=true and is skipped otherwise.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/picomq/pico-connectors/runtime/servertest/freeport"
)

// DefaultBinDir is where Debian's postgresql-15 package puts the server
// binaries. PICO_PG_BINDIR overrides it.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// InstallHint says how to get the binaries.
const InstallHint = "apt-get install -y postgresql-15"

// Server is one running PostgreSQL server.
type Server struct {
	// Dir is the temporary folder holding the data folder, socket and log.
	Dir string
	// DataDir is the cluster's data folder.
	DataDir string
	// Port is the TCP port on 127.0.0.1.
	Port int

	binDir    string
	asUser    string // "" when running as the current user
	mu        sync.Mutex
	up        bool
	closeOnce sync.Once
}

// BinDir returns the folder with initdb, pg_ctl and postgres, or "" when
// it cannot be found.
func BinDir() string {
	candidates := []string{os.Getenv("PICO_PG_BINDIR"), DefaultBinDir}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	for _, dir := range candidates {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
				return dir
			}
		}
	}
	return ""
}

// ErrNoBinaries is returned by New when the server binaries are missing.
var ErrNoBinaries = errors.New("PostgreSQL 15 server binaries not found in " + DefaultBinDir + " (or $PICO_PG_BINDIR); install them with: " + InstallHint)

// New starts a fresh server, for a program or a TestMain that shares one
// server between tests; the caller must Close it. It returns ErrNoBinaries
// when the server binaries are missing.
func New() (*Server, error) {
	bin := BinDir()
	if bin == "" {
		return nil, ErrNoBinaries
	}
	s, err := start(bin)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return s, nil
}

// Start is New for a test: it stops and removes the server when the test
// ends, and fails or skips the test as Need does when New fails.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	Need(t, err)
	t.Cleanup(s.Close)
	return s
}

// Need fails the test (CI=true) or skips it when err, from New, says
// the binaries are missing, and fails it on any other error.
func Need(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrNoBinaries) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// CreateDatabase creates a fresh database and returns its DSN.
func (s *Server) CreateDatabase(t testing.TB, name string) string {
	t.Helper()
	s.Exec(t, "CREATE DATABASE "+name)
	return s.DSNFor("postgres", name)
}

func start(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, DataDir: filepath.Join(dir, "data"), binDir: bin}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// The postgres user must be able to reach the folder: MkdirTemp makes
	// it 0700, and os.TempDir may be under a folder only root traverses.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		s.asUser = "postgres"
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("running as root needs a postgres user to run initdb: %v", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
		for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				return fail(fmt.Errorf("folder %s is not traversable by the postgres user; set TMPDIR to a folder that is", d))
			}
		}
	}
	if out, err := s.run("initdb", "-D", s.DataDir, "--no-sync", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	conf := `
listen_addresses = '127.0.0.1'
unix_socket_directories = '` + dir + `'
wal_level = logical
max_replication_slots = 100
max_wal_senders = 50
fsync = off
synchronous_commit = on
full_page_writes = off
shared_buffers = 128MB
max_connections = 200
log_min_messages = warning
`
	f, err := os.OpenFile(filepath.Join(s.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fail(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fail(err)
	}
	f.Close()
	port, err := freeport.Port()
	if err != nil {
		return fail(err)
	}
	s.Port = port
	if err := s.Start(); err != nil {
		return fail(err)
	}
	return s, nil
}

// run runs a binary from the bin folder, as the postgres user when needed.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.binDir, name)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.Dir
	return cmd.CombinedOutput()
}

// Start starts a stopped server on the same port and data folder.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return nil
	}
	logFile := filepath.Join(s.Dir, "postgres.log")
	out, err := s.run("pg_ctl", "-D", s.DataDir, "-l", logFile, "-o", "-p "+strconv.Itoa(s.Port), "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	s.up = true
	return nil
}

// Stop stops the server (fast shutdown); Start brings it back.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		return nil
	}
	out, err := s.run("pg_ctl", "-D", s.DataDir, "-m", "fast", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	s.up = false
	return nil
}

// Restart stops and starts the server, failing the test on error.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
}

// Close stops the server and removes its folder. It is safe to call twice;
// a second call returns once the first is done.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if err := s.Stop(); err != nil {
			// Leave nothing running: an immediate stop as a last resort.
			_, _ = s.run("pg_ctl", "-D", s.DataDir, "-m", "immediate", "stop")
		}
		_ = os.RemoveAll(s.Dir)
	})
}

// DSN returns a connection string for the postgres superuser and the
// postgres database.
func (s *Server) DSN() string { return s.DSNFor("postgres", "postgres") }

// DSNFor returns a connection string for a user and database. Every user is
// trusted, so no password is needed.
func (s *Server) DSNFor(user, database string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, s.Port, database)
}

// Exec runs SQL statements (several may be separated by semicolons) as the
// superuser, failing the test on error.
func (s *Server) Exec(t testing.TB, sql string) {
	t.Helper()
	if err := ExecDSN(s.DSN(), sql); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

// ExecDSN runs SQL statements (several may be separated by semicolons) on
// the database of dsn; the error of a statement quotes the SQL.
func ExecDSN(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("%w\nin: %s", err, sql)
	}
	return nil
}

// QueryRow scans the one row of the query sql on dsn into dest.
func QueryRow(dsn, sql string, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}
