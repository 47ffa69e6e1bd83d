//! Wasm generated for the tests of a wall: modules that no compiler
//! would emit from a Tick's source (more memories and tables than a Tick
//! may define, a function that is slow to compile, a bare preview-1 call),
//! made with `wasm-encoder` so each test says exactly what it sends.

use crate::TempDir;
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, EntityType, ExportKind, ExportSection,
    Function, FunctionSection, ImportSection, MemorySection, MemoryType, Module, RefType,
    TableSection, TableType, TypeSection, ValType,
};

/// Writes generated wasm into `dir` as `name`; its path.
pub fn write_wasm(dir: &TempDir, name: &str, bytes: &[u8]) -> String {
    let p = dir.path(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

fn memory(pages: u64) -> MemoryType {
    MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    }
}

fn table(elements: u64) -> TableType {
    TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: elements,
        maximum: None,
        shared: false,
    }
}

/// A core module with `memories` memories and `tables` tables (all empty at
/// first) whose `_start` grows each memory by `grow_mib` and fills it (so
/// the pages are really resident), then grows each table by
/// `grow_elements` and fills it with a function reference (not null, so
/// its pages are written too). It imports nothing and answers no protocol:
/// a Tick that gets through `_start` simply exits.
pub fn grower(memories: u32, tables: u32, grow_mib: i32, grow_elements: i32) -> Vec<u8> {
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    m.section(&funcs);
    let mut ts = TableSection::new();
    for _ in 0..tables {
        ts.table(table(0));
    }
    m.section(&ts);
    let mut ms = MemorySection::new();
    for _ in 0..memories {
        ms.memory(memory(0));
    }
    m.section(&ms);
    let mut exports = ExportSection::new();
    exports.export("_start", ExportKind::Func, 0);
    m.section(&exports);
    // `ref.func 0` needs the function declared.
    let mut elems = wasm_encoder::ElementSection::new();
    elems.declared(wasm_encoder::Elements::Functions(
        std::borrow::Cow::Borrowed(&[0]),
    ));
    m.section(&elems);
    let mut f = Function::new([]);
    let mut ins = f.instructions();
    for i in 0..memories {
        ins.i32_const(grow_mib * 16).memory_grow(i).drop();
        ins.i32_const(0)
            .i32_const(1)
            .i32_const(grow_mib << 20)
            .memory_fill(i);
    }
    for t in 0..tables {
        ins.ref_func(0)
            .i32_const(grow_elements)
            .table_grow(t)
            .drop();
        ins.i32_const(0)
            .ref_func(0)
            .i32_const(grow_elements)
            .table_fill(t);
    }
    ins.end();
    let mut code = CodeSection::new();
    code.function(&f);
    m.section(&code);
    m.finish()
}

/// A valid 23 KB module that is slow for Cranelift: one function with
/// 2000 locals inside 500 nested loops, so SSA construction gives every loop
/// header a parameter per live local: unbounded, its compile takes
/// seconds and hundreds of megabytes, the cost a compile bound must cap.
pub fn compile_bomb() -> Vec<u8> {
    let (locals, depth) = (2000u32, 500u32);
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    types.ty().function([], []);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    funcs.function(1);
    m.section(&funcs);
    // A command's entry point, so the module passes the checks before compiling.
    let mut exports = ExportSection::new();
    exports.export("_start", ExportKind::Func, 1);
    m.section(&exports);
    let mut code = CodeSection::new();
    let mut f = Function::new([(locals, ValType::I32)]);
    let mut ins = f.instructions();
    for d in 0..depth {
        ins.loop_(BlockType::Empty);
        for k in 0..4 {
            let a = (d * 7 + k * 13) % locals + 1;
            let c = (d * 11 + k * 17) % locals + 1;
            ins.local_get(a).local_get(c).i32_add().local_set(c);
        }
    }
    for d in 0..depth {
        ins.local_get((d * 5) % locals + 1).br_if(0).end();
    }
    ins.local_get(0).end();
    code.function(&f);
    let mut start = Function::new([]);
    start.instructions().end();
    code.function(&start);
    m.section(&code);
    m.finish()
}

/// A preview-1 module that asks for a symlink `link` → `target` in its first
/// preopen (fd 3) and exits with the errno it got.
pub fn p1_symlinker(target: &str) -> Vec<u8> {
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 5], [ValType::I32]);
    types.ty().function([ValType::I32], []);
    types.ty().function([], []);
    m.section(&types);
    let mut imports = ImportSection::new();
    imports.import(
        "wasi_snapshot_preview1",
        "path_symlink",
        EntityType::Function(0),
    );
    imports.import(
        "wasi_snapshot_preview1",
        "proc_exit",
        EntityType::Function(1),
    );
    m.section(&imports);
    let mut funcs = FunctionSection::new();
    funcs.function(2);
    m.section(&funcs);
    let mut ms = MemorySection::new();
    ms.memory(memory(1));
    m.section(&ms);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("_start", ExportKind::Func, 2);
    m.section(&exports);
    let mut f = Function::new([]);
    f.instructions()
        .i32_const(0)
        .i32_const(target.len() as i32)
        .i32_const(3)
        .i32_const(1024)
        .i32_const(4)
        .call(0)
        .call(1)
        .end();
    let mut code = CodeSection::new();
    code.function(&f);
    m.section(&code);
    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(0), target.bytes());
    data.active(0, &ConstExpr::i32_const(1024), b"link".iter().copied());
    m.section(&data);
    m.finish()
}
