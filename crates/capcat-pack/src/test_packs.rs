//! Packs the unit tests of several modules seal and open.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::{CaptureIdentity, Dtype, PackLimits, PackWriter, RecordMetadata};

/// A pack of mixed dtypes, so that the file order (by dtype alignment) is
/// not the record order, with empty payloads among them.
pub(crate) fn mixed_pack() -> PackWriter {
    let dtypes = [
        Dtype::BF16,
        Dtype::F64,
        Dtype::U8,
        Dtype::F32,
        Dtype::BOOL,
        Dtype::I64,
    ];
    let records: Vec<(Dtype, u64)> = (0..48u64)
        .map(|index| {
            let dtype = dtypes[index as usize % dtypes.len()];
            let elements = if index % 11 == 3 {
                0
            } else {
                1 + index * 37 % 500
            };
            (dtype, elements)
        })
        .collect();
    pack_of(&records)
}

/// A pack of one record per `(dtype, elements)`, each a vector.
pub(crate) fn pack_of(records: &[(Dtype, u64)]) -> PackWriter {
    let mut writer = PackWriter::new(Uuid::from_u128(7), PackLimits::default());
    for (index, &(dtype, elements)) in records.iter().enumerate() {
        let index = index as u64;
        let shape = vec![elements];
        let length = dtype.byte_length(&shape).expect("small") as usize;
        let payload: Vec<u8> = (0..length)
            .map(|i| {
                if dtype == Dtype::BOOL {
                    (i % 2) as u8
                } else {
                    (i * 13 + index as usize) as u8
                }
            })
            .collect();
        let metadata = RecordMetadata {
            identity: CaptureIdentity {
                tenant_id: "tenant".to_owned(),
                experiment_id: "experiment".to_owned(),
                run_id: "run".to_owned(),
                captured_at_ns: index,
                capture_id: Uuid::from_u128(u128::from(index) + 1),
            },
            model: "model".to_owned(),
            module_path: format!("layers.{index}"),
            hook: "forward_output".to_owned(),
            step: index,
            tensor_name: "output".to_owned(),
            dtype,
            shape,
            tags: BTreeMap::new(),
        };
        writer.append(metadata, payload).expect("valid record");
    }
    writer
}
