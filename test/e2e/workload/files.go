package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/burstcache/burstcache/test/e2e/pattern"
)

func write(dir string, count, size int) error {
	for i := range count {
		if err := writeFile(filepath.Join(dir, pattern.Name(i)), pattern.Bytes(pattern.Name(i), size)); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d files of %d bytes\n", count, size)
	return verify(dir, count, size)
}

func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

func verify(dir string, count, size int) error {
	for i := range count {
		if err := check(filepath.Join(dir, pattern.Name(i)), pattern.Bytes(pattern.Name(i), size)); err != nil {
			return err
		}
	}
	fmt.Printf("verified %d files of %d bytes\n", count, size)
	return nil
}

func check(path string, want []byte) error {
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: %d bytes differ from the %d expected", path, len(got), len(want))
	}
	return nil
}

func cat(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(os.Stdout, f)
	return err
}

// churn writes, rereads and removes 256 KiB files until d has passed.
func churn(dir string, d time.Duration) error {
	rounds := 0
	for end := time.Now().Add(d); time.Now().Before(end); rounds++ {
		name := fmt.Sprintf("churn-%d", rounds)
		path := filepath.Join(dir, name)
		data := pattern.Bytes(name, 256<<10)
		if err := writeFile(path, data); err != nil {
			return fmt.Errorf("round %d: %w", rounds, err)
		}
		if err := check(path, data); err != nil {
			return fmt.Errorf("round %d: %w", rounds, err)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("round %d: %w", rounds, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("churned %d rounds without an error\n", rounds)
	return nil
}
