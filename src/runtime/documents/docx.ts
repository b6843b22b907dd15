/** Word documents: the text read with mammoth, a document generated from paragraphs with docx. */

export async function docxRead(bytes: Uint8Array): Promise<string> {
  const mammoth = (await import('mammoth')).default as typeof import('mammoth');
  const result = await mammoth.extractRawText({ buffer: Buffer.from(bytes) });
  return result.value.replace(/\n{3,}/g, '\n\n').trim();
}

export async function docxWrite(paragraphs: string[]): Promise<Uint8Array> {
  const { Document, Packer, Paragraph } = await import('docx');
  const document = new Document({ sections: [{ children: paragraphs.map((text) => new Paragraph({ text })) }] });
  return new Uint8Array(await Packer.toBuffer(document));
}
