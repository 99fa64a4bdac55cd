// Package durable replaces small files so that a crash of the process or
// of the machine leaves either the old file or the whole new one.
//
// A file written and renamed into place without an fsync can be found
// empty after a crash of the machine: file systems with delayed allocation
// (ext4, XFS) may commit the rename before the data. A server whose record
// of its cache directory was found empty would refuse to start, with dirty
// data in its index waiting for it.
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces the file at path with data, with permissions perm.
// Each step says what a crash right after it leaves behind.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".new"
	if err := writeSynced(tmp, data, perm); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	// Durable step: the new content, under the temporary name. A crash
	// here leaves the old file, and a stray temporary one that the next
	// write replaces.
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	// Durable step: the new name. A crash before it may find the old
	// file, or the new one.
	return SyncDir(filepath.Dir(path))
}

// writeSynced writes data to a new file p and fsyncs it.
func writeSynced(p string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// SyncDir makes the entries of dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
