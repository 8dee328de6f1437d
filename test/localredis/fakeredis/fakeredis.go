// Package fakeredis serves fake Redis servers on loopback for tests of
// clients that must survive hostile ones: a server whose answers a test
// chooses (HostileAnswer, MasterAnswer), or a tarpit that never answers. It
// records what clients send, e.g. a password. It has no dependency beyond
// the standard library, so that fuzz builds of its users stay small.
package fakeredis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// Limits of what a Server reads from its clients: it is a test harness, but
// it reads whatever a client under test sends.
const (
	maxInLine     = 1 << 10
	maxInArgs     = 64
	maxInArg      = 64 << 10
	maxInReceived = 1 << 20
)

// Server is a TCP listener on 127.0.0.1 that reads RESP commands and answers
// each with what Answer returns for it (nothing, when Answer is nil: a
// tarpit that accepts and never answers). It records every command it
// reads, so tests can see what a client sent, e.g. a password.
type Server struct {
	ln     net.Listener
	answer func(args []string) []byte

	mu       sync.Mutex
	commands [][]string
	received int
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// Start listens on a free loopback port. answer gets each command's
// arguments (the name first, as sent) and returns the raw bytes to send
// back; nil or an empty answer sends nothing.
func Start(answer func(args []string) []byte) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for a fake Redis: %w", err)
	}
	f := &Server{ln: ln, answer: answer, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	return f, nil
}

// Port is the port the fake listens on.
func (f *Server) Port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// Commands returns the commands read so far, in order.
func (f *Server) Commands() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, len(f.commands))
	copy(out, f.commands)
	return out
}

// Close stops listening, closes every connection and waits for them.
func (f *Server) Close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *Server) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.wg.Go(func() {
			defer func() {
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
				_ = c.Close()
			}()
			f.serve(c)
		})
	}
}

func (f *Server) serve(c net.Conn) {
	r := bufio.NewReaderSize(c, maxInLine)
	for {
		args, n, err := readCommand(r)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.received += n
		full := f.received > maxInReceived
		if !full {
			f.commands = append(f.commands, args)
		}
		f.mu.Unlock()
		if full {
			return
		}
		if f.answer == nil {
			continue // a tarpit reads on and never answers
		}
		if out := f.answer(args); len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

var errCommand = errors.New("not a RESP command")

// readCommand reads one array of bulk strings, within the server's limits;
// it also returns the bytes the command took.
func readCommand(r *bufio.Reader) ([]string, int, error) {
	count, n, err := readHeader(r, '*', maxInArgs)
	if err != nil {
		return nil, 0, err
	}
	args := make([]string, 0, count)
	for range count {
		size, m, err := readHeader(r, '$', maxInArg)
		if err != nil {
			return nil, 0, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, 0, err
		}
		args = append(args, string(buf[:size]))
		n += m + size + 2
	}
	return args, n, nil
}

func readHeader(r *bufio.Reader, typ byte, limit int) (int, int, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, 0, err
	}
	if len(line) < 4 || line[0] != typ || line[len(line)-2] != '\r' {
		return 0, 0, fmt.Errorf("%w: %q", errCommand, line)
	}
	v, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil || v < 0 || v > limit {
		return 0, 0, fmt.Errorf("%w: %q", errCommand, line)
	}
	return v, len(line), nil
}

// HostileAnswer answers like a Redis until it is asked for its role: then
// INFO gets a bulk string header claiming 1 TiB and ROLE an array header
// claiming 2^32 elements, and nothing more, as a pod that wants its client
// to allocate them would.
func HostileAnswer(args []string) []byte {
	if len(args) == 0 {
		return nil
	}
	switch name := args[0]; {
	case strings.EqualFold(name, "INFO"):
		return []byte("$1099511627776\r\n")
	case strings.EqualFold(name, "ROLE"), strings.EqualFold(name, "CLUSTER"):
		return []byte("*4294967296\r\n")
	case strings.EqualFold(name, "HELLO"):
		return []byte("-ERR unknown command 'HELLO'\r\n")
	default:
		return []byte("+OK\r\n")
	}
}

// MasterAnswer answers like a stand-alone Redis master without a password:
// what a client asking for the role of a pod gets from a real one.
func MasterAnswer(args []string) []byte {
	if len(args) == 0 {
		return nil
	}
	switch name := args[0]; {
	case strings.EqualFold(name, "INFO"):
		const info = "# Cluster\r\ncluster_enabled:0\r\n"
		return []byte("$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n")
	case strings.EqualFold(name, "ROLE"):
		return []byte("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n")
	case strings.EqualFold(name, "HELLO"):
		return []byte("-ERR unknown command 'HELLO'\r\n")
	default:
		return []byte("+OK\r\n")
	}
}
