// The JSON manifest: encoding, strict decoding and the layout rules it must satisfy.
// Thread-safe (pure functions). docs/checkpoint_format.md, "Manifest", has the schema.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/format.h"
#include "tandem/checkpoint.h"

namespace tandem::ckpt {

// The data sections a snapshot with this structure must have, in file order: tensors in
// order, and for each its non-empty arrays (by the tensor's own formats) in ascending
// kind. Each entry's raw_length is the array's byte size; offsets, lengths, CRCs and
// codecs are left zero/"none".
// `info` must have passed DecodeManifest's structural checks (or come from a valid snapshot).
std::vector<CheckpointSection> ExpectedSections(const CheckpointInfo& info);

// Where section payloads start: the first at AlignUp(kHeaderSize), each next one at
// AlignUp(end of the previous), the manifest at AlignUp(end of the last).
inline uint64_t AlignUp(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

// Serialises info (algo, formats, groups, step, metadata, tensors with their shape,
// step and formats, sections) as compact JSON in the schema of version kVersion. Throws
// nlohmann::json::exception if a name or the metadata is not valid UTF-8.
std::string EncodeManifest(const CheckpointInfo& info);

// Parses and checks a manifest written by format `version` (in [kOldestReadableVersion,
// kVersion]): JSON syntax and schema, names of algorithm/formats/dtypes, hyper-parameters
// (ValidateHyperParams), tensor groups, and that the section table equals
// ExpectedSections in order with each section laid out as AlignUp says, ending before
// `manifest_offset`, with lengths consistent with codecs. Ranges that need the whole
// snapshot (steps, shapes, duplicate names) are left to ValidateSnapshotLayout.
// A version 1 manifest has no shapes, tensor steps or metadata: every tensor's step is
// then the global step, its shape and the metadata empty. Before version 3 tensors have
// no formats of their own: each takes the file's formats. ExpectedSections follows each
// tensor's formats. Fills every field of *info
// except path, file_size and version. Throws Error(kCorruption) prefixed with `where`.
void DecodeManifest(const std::string& text, uint32_t version, uint64_t manifest_offset,
                    const std::string& where, CheckpointInfo* info);

}  // namespace tandem::ckpt
